//! Healthy prose for the repetition benchmarks and the CPU-time example:
//! SciFact titles and abstracts from `../shared/data/scifact/corpus.jsonl`
//! (or `$DELOOP_SHARED_DIR`), repeated document by document.

/// `size` bytes of prose (cut at a character boundary).
pub fn prose(size: usize) -> String {
    let path = deloop_testdata::shared_dir().join("data/scifact/corpus.jsonl");
    let data = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}; set DELOOP_SHARED_DIR", path.display()));
    let mut out = String::with_capacity(size + 4096);
    'outer: loop {
        for line in data.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            out.push_str(v["title"].as_str().unwrap_or(""));
            out.push_str("\n\n");
            out.push_str(v["text"].as_str().unwrap_or(""));
            out.push_str("\n\n");
            if out.len() >= size {
                break 'outer;
            }
        }
    }
    let mut end = size.min(out.len());
    while !out.is_char_boundary(end) {
        end -= 1;
    }
    out.truncate(end);
    out
}
