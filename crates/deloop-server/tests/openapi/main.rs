//! `GET /openapi.json` over real TCP: the document is OpenAPI 3.1 whose
//! references all resolve, it lists exactly the routes the server serves,
//! real answers (JSON, problem+json, JSON lines, SSE events) validate
//! against its schemas, and its request schemas accept what the server
//! accepts and refuse what it refuses with a 400.

mod answers;
#[path = "../common.rs"]
mod common;
mod document;
mod names;
mod requests;
mod routes;
