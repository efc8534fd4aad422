//! One real call against a configured server: a JSON generation and a
//! guarded stream. Not a test (it needs a server); run it by hand:
//!
//! ```text
//! DELOOP_LIVE_OPENAI_BASE_URL=http://localhost:11434/v1 DELOOP_MODEL=qwen2.5:0.5b \
//!   cargo run -p deloop-llm --example live
//! GEMINI_API_KEY=... cargo run -p deloop-llm --example live
//! ```
//!
//! `DELOOP_LIVE_OPENAI_BASE_URL` wins over the usual variables
//! (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `GEMINI_API_KEY`, `DELOOP_MODEL`).
//! Exit codes: 0 both calls succeeded, 1 a call failed, 2 nothing configured.

use std::time::Duration;

use deloop_llm::{CancellationToken, ClampConfig, GenerateRequest, JsonMode, LlmClient, LlmConfig};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut config = match LlmConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("live: {e}");
            std::process::exit(2);
        }
    };
    if let Ok(url) = std::env::var("DELOOP_LIVE_OPENAI_BASE_URL") {
        config.openai_base_url = Some(url);
        config.provider = Some(deloop_llm::Provider::Openai);
    }
    let client = match LlmClient::from_config(&config) {
        Ok(Some(c)) => c,
        Ok(None) => {
            eprintln!(
                "live: no LLM configured; set DELOOP_LIVE_OPENAI_BASE_URL (+ DELOOP_MODEL), \
                 OPENAI_BASE_URL (+ DELOOP_MODEL) or GEMINI_API_KEY"
            );
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("live: {e}");
            std::process::exit(2);
        }
    };
    println!("model: {}", client.model());
    let cancel = CancellationToken::new();

    let mut req = GenerateRequest::new("In one sentence, what is a hash table?");
    req.system = Some("You are a concise technical writer.".into());
    req.json = JsonMode::Schema(serde_json::json!({
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"]
    }));
    req.max_output_tokens = Some(200);
    req.timeout = Duration::from_secs(120);
    let mut failed = false;
    match client.generate(&req, &cancel).await {
        Ok(g) => println!(
            "generate: finish={:?} truncated={} attempts={} text={}",
            g.finish, g.truncated, g.attempts, g.text
        ),
        Err(e) => {
            failed = true;
            eprintln!("generate failed: {e}");
        }
    }

    let mut req = GenerateRequest::new("Count from 1 to 20 in words, separated by commas.");
    req.max_output_tokens = Some(300);
    req.timeout = Duration::from_secs(120);
    print!("stream: ");
    let result = client
        .generate_stream(&req, &cancel, Some(ClampConfig::default()), |d| {
            print!("{d}")
        })
        .await;
    println!();
    match result {
        Ok(g) => println!(
            "stream: finish={:?} loop_cut={} saved_chars={} attempts={}",
            g.finish,
            g.loop_cut.is_some(),
            g.saved_chars,
            g.attempts
        ),
        Err(e) => {
            failed = true;
            eprintln!("stream failed: {e}");
        }
    }
    std::process::exit(i32::from(failed));
}
