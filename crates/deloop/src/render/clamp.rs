//! Output formats (human and JSON) for the `clamp` command family.
