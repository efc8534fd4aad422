//! Tokenizing texts for the local MiniLM models (candle's and ONNX
//! Runtime's): MiniLM's own `tokenizer.json`, batches padded to their
//! longest text.

use std::path::Path;

use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::{EmbedError, MINILM_DIR_ENV};

/// A tokenized batch, padded to its longest text: the encodings and their
/// ids and attention mask flattened row by row (`n` rows of `len`), in the
/// integer type the model takes.
pub(crate) struct TokenBatch<T> {
    pub(crate) encodings: Vec<tokenizers::Encoding>,
    pub(crate) n: usize,
    pub(crate) len: usize,
    pub(crate) ids: Vec<T>,
    pub(crate) mask: Vec<T>,
}

impl<T: From<u32>> TokenBatch<T> {
    /// Tokenizes `texts` with `tokenizer`; an error names `model`.
    pub(crate) fn encode(
        tokenizer: &Tokenizer,
        texts: &[&str],
        model: &str,
    ) -> Result<Self, EmbedError> {
        let inputs: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        let encodings = tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| EmbedError::Failed(format!("{model}: {e}")))?;
        let n = encodings.len();
        let len = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for e in &encodings {
            ids.extend(e.get_ids().iter().map(|&x| T::from(x)));
            mask.extend(e.get_attention_mask().iter().map(|&x| T::from(x)));
        }
        Ok(Self {
            encodings,
            n,
            len,
            ids,
            mask,
        })
    }
}

/// MiniLM's `tokenizer.json` from `dir`, set to pad each batch to its
/// longest text and truncate at `max_tokens` word pieces.
pub(crate) fn minilm_tokenizer(dir: &Path, max_tokens: usize) -> Result<Tokenizer, EmbedError> {
    let tok = dir.join("tokenizer.json");
    if !tok.is_file() {
        return Err(EmbedError::Unavailable(format!(
            "{} is missing; run scripts/setup-model.sh or point {MINILM_DIR_ENV} \
             at a directory with the all-MiniLM-L6-v2 files",
            tok.display()
        )));
    }
    let bad = |e: &dyn std::fmt::Display| {
        EmbedError::Unavailable(format!("cannot load MiniLM {}: {e}", tok.display()))
    };
    let mut tokenizer = Tokenizer::from_file(&tok).map_err(|e| bad(&e))?;
    tokenizer.with_padding(Some(PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        ..Default::default()
    }));
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens,
            ..Default::default()
        }))
        .map_err(|e| bad(&e))?;
    Ok(tokenizer)
}
