//! The guards as endpoints. Each answers the same JSON value as the
//! command line's `--json` for the same input and options.

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use deloop_check::{CheckError, CheckOptions};
use deloop_core::repetition::{clamp, ClampConfig};
use deloop_core::rescue::{repair_with, rescue_with, RescueOptions};
use deloop_render::check::JsonLines;
use serde::Deserialize;
use serde_json::Value;

use deloop_events::{EventKind, GuardEvent};

use crate::error::{ApiError, ApiJson, ApiQuery};
use crate::openapi::{BadRequest, PayloadTooLarge, Unprocessable, UnsupportedMediaType};
use crate::state::AppState;
use utoipa::openapi::schema::{OneOfBuilder, Schema};
use utoipa::openapi::{Ref, RefOr};

/// `POST /v1/clamp` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClampRequest {
    /// The text to guard, complete (for example a model's whole answer).
    pub text: String,
    /// Guard settings: the CLI config file's `[words]`, `[substring]` and
    /// `[healthy]` tables, plus `seed_compat`. Absent: the server's defaults.
    pub config: Option<ClampRequestConfig>,
}

/// Per-request guard settings. Unknown keys are refused when the tables
/// are read as a `ClampConfig` (serde cannot deny them beside `flatten`).
#[derive(Debug, Deserialize)]
pub struct ClampRequestConfig {
    /// The seed's exact rules (like `deloop clamp --seed-compat`).
    #[serde(default)]
    pub seed_compat: bool,
    /// `[words]`, `[substring]`, `[healthy]` as in `deloop clamp --config`.
    #[serde(flatten)]
    pub tables: serde_json::Map<String, Value>,
}

impl utoipa::PartialSchema for ClampRequestConfig {
    /// The `[words]`, `[substring]`, `[near]` and `[healthy]` tables of
    /// [`ClampConfig`] (its own schema, unknown keys refused) plus
    /// `seed_compat`.
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
        use utoipa::openapi::RefOr;
        let mut object = match <ClampConfig as utoipa::PartialSchema>::schema() {
            RefOr::T(Schema::Object(o)) => o,
            _ => ObjectBuilder::new().schema_type(Type::Object).build(),
        };
        object.properties.insert(
            "seed_compat".to_string(),
            ObjectBuilder::new()
                .schema_type(Type::Boolean)
                .description(Some(
                    "The seed's exact rules (like `deloop clamp --seed-compat`); not with the tables.",
                ))
                .into(),
        );
        object.description = Some(
            "Guard settings: the `[words]`, `[substring]`, `[near]` and `[healthy]` tables of \
             `deloop clamp --config` (keys in docs/repetition.md; missing keys take the \
             defaults), or `seed_compat: true`."
                .to_string(),
        );
        RefOr::T(Schema::Object(object))
    }
}

impl utoipa::ToSchema for ClampRequestConfig {
    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        <ClampConfig as utoipa::ToSchema>::schemas(schemas);
    }
}

fn clamp_config(state: &AppState, c: Option<ClampRequestConfig>) -> Result<ClampConfig, ApiError> {
    let Some(c) = c else {
        return Ok(state.clamp_config().clone());
    };
    if c.seed_compat && !c.tables.is_empty() {
        return Err(ApiError::bad_request(
            "config.seed_compat and config tables both set the guard rules; use one of them",
        ));
    }
    if c.seed_compat {
        return Ok(ClampConfig::seed_compat());
    }
    let config: ClampConfig = serde_json::from_value(Value::Object(c.tables)).map_err(|e| {
        ApiError::bad_request(format!(
            "invalid field `config`: {e} (keys are listed in docs/repetition.md)"
        ))
    })?;
    config.check_bounds().map_err(|e| {
        ApiError::unprocessable(format!(
            "field `config`: {e}; change the value (the bounds are listed in docs/repetition.md)"
        ))
    })?;
    Ok(config)
}

/// `POST /v1/clamp`: cuts periodic loops out of `text`.
#[utoipa::path(
    post,
    path = "/v1/clamp",
    operation_id = "clamp",
    tag = "guards",
    summary = "Cut repetition loops out of a text",
    description = "Guards `text` with the repetition clamps and answers the same JSON value as \
`deloop clamp --json`. `config` overrides the server's guard settings for this request.",
    request_body = ClampRequest,
    responses(
        (status = 200, description = "The guarded text and what was cut (`deloop clamp --json`).", body = deloop_render::clamp::ClampJson),
        (status = 400, response = BadRequest),
        (status = 413, response = PayloadTooLarge),
        (status = 422, response = Unprocessable),
        (status = 415, response = UnsupportedMediaType),
    ),
)]
pub async fn clamp_text(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<ClampRequest>,
) -> Result<Response, ApiError> {
    Ok(axum::Json(clamp_value(&state, req).await?).into_response())
}

/// The `deloop clamp --json` value for a request (HTTP and MCP).
pub async fn clamp_value(state: &AppState, req: ClampRequest) -> Result<Value, ApiError> {
    let config = clamp_config(state, req.config)?;
    let text = req.text;
    // The text around a cut, for the console's Live page.
    let text_for_event = text.clone();
    let out = off_runtime("clamp", move || clamp(&text, &config)).await?;
    if let Some(r) = out.report() {
        let saved = r.removed_bytes as u64;
        state
            .metrics()
            .loop_cut("clamp", &format!("{:?}", r.detector), saved);
        let mut ev = GuardEvent::new(EventKind::TextCut, "clamp").with_saved(saved);
        ev.detector = Some(snake(&r.detector));
        ev.period = Some(r.period);
        ev.unit = Some(r.unit.clone());
        ev.context = Some(around(&text_for_event, r.start));
        state.events().publish(ev);
    }
    Ok(deloop_render::clamp::json_value(&out))
}

/// Up to 300 bytes before `at` and 300 after (on character boundaries).
fn around(text: &str, at: usize) -> String {
    let mut a = at.saturating_sub(300).min(text.len());
    while !text.is_char_boundary(a) {
        a -= 1;
    }
    let mut b = at.saturating_add(300).min(text.len());
    while !text.is_char_boundary(b) {
        b += 1;
    }
    text[a..b].to_string()
}

/// A value's snake_case name, as it serialises.
fn snake(v: &impl serde::Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Publishes a rescue or repair (`what`) with its repairs, by snake_case name.
fn publish_rescue(state: &AppState, what: &str, repairs: &[impl serde::Serialize]) {
    let repairs: Vec<String> = repairs.iter().map(snake).collect();
    let mut ev = GuardEvent::new(EventKind::JsonRescue, "api");
    ev.message = Some(if repairs.is_empty() {
        format!("{what}: valid as sent")
    } else {
        format!("{what}: {}", repairs.join(", "))
    });
    state.events().publish(ev);
}

/// The rescue and repair limits: the input may be as large as a body.
fn rescue_options(state: &AppState) -> RescueOptions {
    RescueOptions {
        max_input_bytes: state.settings().max_body_bytes,
        ..RescueOptions::default()
    }
}

/// Runs a guard's CPU-bound work on the blocking pool, so a large input does
/// not stall the async workers; a panicked task becomes a 500 naming `what`.
async fn off_runtime<T: Send + 'static>(
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::internal(format!("{what} task failed: {e}")))
}

/// `POST /v1/rescue` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RescueRequest {
    /// The model's raw output, as received.
    pub text: String,
    /// The key whose value to rescue, for example "answer". The first
    /// occurrence at any depth is used.
    pub key: String,
}

/// `POST /v1/rescue`: the value of `key` in broken JSON model output. A
/// rescue that finds nothing is a 200 with `"ok": false`.
#[utoipa::path(
    post,
    path = "/v1/rescue",
    operation_id = "rescue",
    tag = "guards",
    summary = "Rescue one key's value from broken JSON model output",
    description = "Answers the same JSON value as `deloop rescue --json`. A rescue that finds \
nothing is a 200 with `\"ok\": false` and `error`.",
    request_body = RescueRequest,
    responses(
        (status = 200, description = "The rescued value and the repairs (`deloop rescue --json`).", body = deloop_render::rescue::RescueJson),
        (status = 400, response = BadRequest),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Unprocessable),
    ),
)]
pub async fn rescue(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<RescueRequest>,
) -> Result<Response, ApiError> {
    Ok(axum::Json(rescue_value(&state, req).await?).into_response())
}

/// The `deloop rescue --json` value for a request (HTTP and MCP).
pub async fn rescue_value(state: &AppState, req: RescueRequest) -> Result<Value, ApiError> {
    let opts = rescue_options(state);
    let out = off_runtime("rescue", move || rescue_with(&req.text, &req.key, &opts)).await?;
    match out {
        Ok(r) => {
            publish_rescue(state, "rescue", &r.repairs);
            Ok(deloop_render::rescue::report_value(
                Some(&r.value),
                &r.repairs,
                None,
            ))
        }
        Err(e) if e.is_input_limit() => Err(ApiError::unprocessable(e.to_string())),
        Err(e) => Ok(deloop_render::rescue::report_value(
            None,
            &[],
            Some(&e.to_string()),
        )),
    }
}

/// `POST /v1/repair` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RepairRequest {
    /// The model's raw output, as received.
    pub text: String,
}

/// `POST /v1/repair`: one valid JSON document from broken model output;
/// 422 when the text holds no JSON at all.
#[utoipa::path(
    post,
    path = "/v1/repair",
    operation_id = "repair",
    tag = "guards",
    summary = "Repair broken JSON model output into one valid document",
    description = "Answers the same JSON value as `deloop repair --json`; 422 when the text \
holds no JSON at all.",
    request_body = RepairRequest,
    responses(
        (status = 200, description = "The repaired document and the repairs (`deloop repair --json`).", body = deloop_render::rescue::RepairJson),
        (status = 400, response = BadRequest),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Unprocessable),
    ),
)]
pub async fn repair(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<RepairRequest>,
) -> Result<Response, ApiError> {
    Ok(axum::Json(repair_value(&state, req).await?).into_response())
}

/// The `deloop repair --json` value for a request (HTTP and MCP).
pub async fn repair_value(state: &AppState, req: RepairRequest) -> Result<Value, ApiError> {
    let opts = rescue_options(state);
    let out = off_runtime("repair", move || repair_with(&req.text, &opts)).await?;
    match out {
        Ok(r) => {
            publish_rescue(state, "repair", &r.repairs);
            Ok(deloop_render::rescue::repair_value(&r.value, &r.repairs))
        }
        Err(e) if e.is_input_limit() => Err(ApiError::unprocessable(e.to_string())),
        Err(e) => Err(ApiError::unprocessable(format!(
            "{e}: the text holds no JSON value to repair"
        ))),
    }
}

/// `POST /v1/check` query.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CheckQuery {
    /// `auto` (default), `events`, `openai` or `anthropic`.
    #[param(value_type = Option<deloop_core::loops::transcript::TranscriptFormat>)]
    pub format: Option<String>,
    /// `default`, `openclaw` or `strict` (default: the server's profile).
    #[param(value_type = Option<deloop_core::loops::Profile>)]
    pub profile: Option<String>,
}

/// The check's options for a request (HTTP query or MCP arguments): the
/// error names the field (`format` or `profile`) and its allowed values.
pub fn check_options(state: &AppState, q: &CheckQuery) -> Result<CheckOptions, String> {
    let format = match q.format.as_deref() {
        None => deloop_core::loops::transcript::TranscriptFormat::Auto,
        Some(f) => f.parse().map_err(|_| {
            format!("`format`: {f:?} is not one of auto, events, openai, anthropic")
        })?,
    };
    let profile = match q.profile.as_deref() {
        None => state.guard().profile,
        Some(p) => p.parse().map_err(|_| {
            format!(
                "`profile`: {p:?} is not one of {}",
                deloop_core::loops::Profile::names_list()
            )
        })?,
    };
    Ok(CheckOptions {
        format,
        profile,
        config: Some(state.guard().config.clone()),
        lossy: false,
    })
}

/// The last line of a `POST /v1/check` stream that failed after
/// streaming began: `{"error": {"line", "message"}}`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct CheckErrorLine {
    /// What went wrong.
    pub error: CheckLineError,
}

/// Where and why the transcript could not be read.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct CheckLineError {
    /// The 1-based line of the transcript, when the error has one.
    #[schema(required)]
    pub line: Option<usize>,
    /// What is wrong with it.
    pub message: String,
}

/// One line of the `application/x-ndjson` answer of `POST /v1/check`: a
/// call's verdict, the summary (last), or an error that ended the stream.
#[derive(Debug, Clone, Copy)]
pub struct CheckLine;

impl utoipa::PartialSchema for CheckLine {
    fn schema() -> RefOr<Schema> {
        use deloop_render::check::{CheckCallLine, CheckSummaryLine};
        use utoipa::ToSchema;
        OneOfBuilder::new()
            .item(Ref::from_schema_name(CheckCallLine::name()))
            .item(Ref::from_schema_name(CheckSummaryLine::name()))
            .item(Ref::from_schema_name(CheckErrorLine::name()))
            .description(Some(
                "One JSON line: each line of the body is one of these objects. One line per \
                 call event in transcript order, then `{\"summary\": {...}}`; a malformed line \
                 found after streaming began ends the stream with `{\"error\": {\"line\", \
                 \"message\"}}` instead of the summary.",
            ))
            .into()
    }
}

impl utoipa::ToSchema for CheckLine {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        use deloop_render::check::{CheckCallLine, CheckSummaryLine};
        use utoipa::PartialSchema;
        schemas.push((CheckCallLine::name().into_owned(), CheckCallLine::schema()));
        CheckCallLine::schemas(schemas);
        schemas.push((
            CheckSummaryLine::name().into_owned(),
            CheckSummaryLine::schema(),
        ));
        CheckSummaryLine::schemas(schemas);
        schemas.push((
            CheckErrorLine::name().into_owned(),
            CheckErrorLine::schema(),
        ));
        CheckErrorLine::schemas(schemas);
    }
}

/// `POST /v1/check`: replays a whole transcript (the body) and streams
/// back the JSON lines of `deloop check --json`, summary included. A
/// malformed line found after streaming began ends the stream with
/// `{"error": {"line": N, "message": "..."}}`.
#[utoipa::path(
    post,
    path = "/v1/check",
    operation_id = "check",
    tag = "guards",
    summary = "Check a whole transcript for tool-call loops",
    description = "Replays the transcript (the body: JSON lines of deloop's events, or OpenAI \
or Anthropic messages as JSON lines or one JSON document; any content type) and streams back \
the JSON lines of `deloop check --json`: one line per call, then the summary. A malformed line \
found after streaming began ends the stream with `{\"error\": {\"line\", \"message\"}}`. \
The stream ends after `server.stream_idle_timeout_secs` without output.",
    params(CheckQuery),
    request_body(
        description = "The transcript.",
        content(
            (String = "application/x-ndjson"),
            (serde_json::Value = "application/json"),
            (String = "text/plain"),
        ),
    ),
    responses(
        (status = 200, description = "JSON lines (`deloop check --json`), streamed.", content_type = "application/x-ndjson", body = CheckLine),
        (status = 400, response = BadRequest),
        (status = 413, response = PayloadTooLarge),
    ),
)]
pub async fn check(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<CheckQuery>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body =
        body.map_err(|r| ApiError::unreadable_body(&r, "the transcript", StatusCode::BAD_REQUEST))?;
    let options = check_options(&state, &q)
        .map_err(|e| ApiError::bad_request(format!("query parameter {e}")))?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    let idle = state.settings().stream_idle_timeout();
    tokio::task::spawn_blocking(move || {
        let mut out = JsonLines::new(ChannelWriter {
            tx: tx.clone(),
            buf: Vec::with_capacity(8192),
        });
        let res = deloop_check::run(std::io::Cursor::new(body), &options, &mut out);
        let _ = std::io::Write::flush(&mut out.into_inner());
        if let Err(e) = res {
            let (line, message) = match e {
                CheckError::Input { line, message } => (line, message),
                other => (None, other.to_string()),
            };
            let mut l = serde_json::to_vec(&CheckErrorLine {
                error: CheckLineError { line, message },
            })
            .unwrap_or_default();
            l.push(b'\n');
            let _ = tx.blocking_send(Ok(Bytes::from(l)));
        }
    });
    let stream =
        crate::streams::idle_timeout(tokio_stream::wrappers::ReceiverStream::new(rx), idle);
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(stream),
    )
        .into_response())
}

/// Sends what `deloop check` writes to the response body, in chunks.
struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
    buf: Vec<u8>,
}

impl std::io::Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= 8192 {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away")
        })
    }
}
