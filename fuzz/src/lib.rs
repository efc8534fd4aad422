//! What the fuzz targets share: how one fuzzer input is read as a few
//! option bits, a chunking, and a payload.
//!
//! Layout of an input: byte 0 holds option bits (each target names its
//! own); the low three bits of byte 1 say how many chunk sizes follow
//! (0 to 7), each one byte (a size of 1 to 256 bytes); the rest is the
//! payload. An input too short for its header is all payload with no
//! options and one chunk. The layout keeps plain seed files useful: a seed
//! that starts with two bytes below 8 is read the same with any options.

/// One fuzzer input, read.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// Option bits (byte 0).
    pub flags: u8,
    /// Chunk sizes, cycled over the payload; empty: one chunk.
    pub sizes: Vec<usize>,
    /// The rest.
    pub payload: &'a [u8],
}

impl<'a> Input<'a> {
    /// Reads the header.
    pub fn read(data: &'a [u8]) -> Self {
        if data.len() < 2 {
            return Input {
                flags: 0,
                sizes: Vec::new(),
                payload: data,
            };
        }
        let n = usize::from(data[1] & 7);
        let n = n.min(data.len() - 2);
        let sizes = data[2..2 + n].iter().map(|&b| usize::from(b) + 1).collect();
        Input {
            flags: data[0],
            sizes,
            payload: &data[2 + n..],
        }
    }

    /// The payload split at the chosen sizes (one chunk when there are
    /// none).
    pub fn chunks(&self) -> Vec<&'a [u8]> {
        split(self.payload, &self.sizes)
    }
}

/// `bytes` split into chunks of the given sizes, cycled; one chunk when
/// `sizes` is empty.
pub fn split<'a>(bytes: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    if sizes.is_empty() {
        return vec![bytes];
    }
    let mut out = Vec::new();
    let (mut off, mut i) = (0, 0);
    while off < bytes.len() {
        let end = (off + sizes[i % sizes.len()].max(1)).min(bytes.len());
        out.push(&bytes[off..end]);
        off = end;
        i += 1;
    }
    out
}
