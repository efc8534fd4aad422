//! Output formats (human and JSON) for the `rescue` command family.
