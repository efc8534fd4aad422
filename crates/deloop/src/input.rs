//! Reading the command's input: a file path, or standard input when the
//! path is absent or `-`.

use std::io::Read;
use std::path::Path;

use crate::exit::BadInput;

/// Reads all bytes from `path`, or from stdin when `path` is `None` or `-`.
pub fn read_bytes(path: Option<&Path>) -> anyhow::Result<Vec<u8>> {
    let mut buf = Vec::new();
    match path {
        None => std::io::stdin().lock().read_to_end(&mut buf).map(|_| ())?,
        Some(p) if p.as_os_str() == "-" => {
            std::io::stdin().lock().read_to_end(&mut buf).map(|_| ())?
        }
        Some(p) => {
            buf = std::fs::read(p)
                .map_err(|e| BadInput(format!("cannot read {}: {e}", p.display())))?;
        }
    }
    Ok(buf)
}

/// Reads the input as text. Invalid UTF-8 is an error that names the byte
/// offset, unless `lossy` is set, in which case each invalid sequence is
/// replaced by U+FFFD (documented in the README as `--lossy`).
pub fn read_text(path: Option<&Path>, lossy: bool) -> anyhow::Result<String> {
    let bytes = read_bytes(path)?;
    decode(bytes, lossy)
}

/// Decodes bytes as UTF-8, strictly or lossily.
pub fn decode(bytes: Vec<u8>, lossy: bool) -> anyhow::Result<String> {
    match String::from_utf8(bytes) {
        Ok(s) => Ok(s),
        Err(e) if lossy => Ok(String::from_utf8_lossy(e.as_bytes()).into_owned()),
        Err(e) => Err(BadInput(format!(
            "input is not valid UTF-8 (first invalid byte at offset {}); \
             fix the encoding or pass --lossy to replace invalid bytes with U+FFFD",
            e.utf8_error().valid_up_to()
        ))
        .into()),
    }
}
