//! Output formats (human and JSON) for the `check` command family.
