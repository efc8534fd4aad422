//! Output formats (human and JSON) for the `oracle` command family.
