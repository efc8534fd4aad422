//! Output formats (human and JSON) for the `search` command family.
