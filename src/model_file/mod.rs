//! The `.omtl` model file.
