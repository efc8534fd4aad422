//! The real all-MiniLM-L6-v2 model (installed by scripts/setup-model.sh).

use deloop_index::{cosine, find_minilm_dir, Embedder, MiniLm};

fn model() -> MiniLm {
    let dir = find_minilm_dir(None)
        .unwrap_or_else(|e| panic!("MiniLM model files are required for this test: {e}"));
    MiniLm::load(&dir).unwrap_or_else(|e| panic!("cannot load MiniLM from {}: {e}", dir.display()))
}

#[test]
fn known_cosine_value() {
    let m = model();
    assert_eq!(m.dim(), 384);
    let v = m
        .embed(&[
            "How do I reset my password?",
            "Steps to recover a forgotten account password",
        ])
        .unwrap();
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].len(), 384);
    let norm: f32 = v[0].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!(
        (norm - 1.0).abs() < 1e-4,
        "vectors are L2-normalised: {norm}"
    );
    let c = cosine(&v[0], &v[1]);
    assert!((c - 0.705).abs() <= 0.01, "cosine {c} is not ~0.705");
}

#[test]
fn padding_does_not_change_vectors_and_order_is_kept() {
    let m = model();
    let short = "password reset";
    let long = "A much longer sentence about configuring the account recovery \
                flow, with several extra words so the batch needs padding.";
    let alone = m.embed(&[short]).unwrap();
    let batch = m.embed(&[long, short, ""]).unwrap();
    assert_eq!(batch.len(), 3);
    // Masked mean pooling: padding in the batch must not move the short text.
    assert!(cosine(&alone[0], &batch[1]) > 0.9999);
    assert!(cosine(&batch[0], &batch[1]) < 0.9);
    assert!(m.embed(&[]).unwrap().is_empty());
}

#[test]
fn long_inputs_are_truncated_not_rejected() {
    let m = model();
    let long = "word ".repeat(5000);
    let v = m.embed(&[&long]).unwrap();
    assert_eq!(v[0].len(), 384);
}
