//! One question answered: retrieval, the LLM's synthesis under the guards,
//! citations, and the extractive answer when the LLM fails or degrades.

use super::events::Events;
use super::{Oracle, OracleError, Resolved};
use crate::ask::{AskEvent, AskOutcome, AskStatus, CutEvent, MetaEvent, SourcesEvent};
use crate::extractive::{extractive_answer, ExtractiveReason};
use crate::hyde::HydeOutcome;
use crate::report::{AskReport, HydeInfo, PassageInfo, RetrievalInfo};
use crate::retrieve::{retrieve, RetrieveOptions};
use crate::synthesis::{synthesize, AnswerOptions, DegradedReason};
use crate::types::Passage;
use deloop_index::{Embedder, Retrieval};
use deloop_llm::LlmClient;

impl Oracle {
    pub(super) async fn answer(
        &self,
        r: Resolved,
        events: &mut Events,
    ) -> Result<AskOutcome, OracleError> {
        let inner = &self.inner;
        let client = inner.client.as_ref().filter(|_| r.use_llm);
        events
            .send(AskEvent::Meta(MetaEvent {
                mode: r.mode,
                lang: r.language,
                retrieval: r.retrieval.name().into(),
                provider: client.map_or("extractive", |_| inner.provider).into(),
                model: client.map_or("extractive", LlmClient::model).into(),
            }))
            .await;

        let hyde = match (r.hyde, client) {
            (false, _) => None,
            (true, Some(client)) => Some(self.hyde(client, &r.question, r.language).await),
            (true, None) => Some(HydeOutcome::fallback("no LLM configured")),
        };

        let hyde_join = inner.settings.hyde_join;
        let qv_mode = hyde_join.mode;
        let (retrieved, embedder_problem) = {
            let question = r.question.clone();
            let passage = hyde.as_ref().and_then(|h| h.passage.clone());
            let opts = RetrieveOptions {
                mode: r.retrieval,
                k: r.k,
                hyde: hyde_join,
            };
            self.blocking(move |inner, index| {
                let (embedder, problem) = if opts.mode == Retrieval::Lexical {
                    (None, None)
                } else {
                    let q = inner.query_embedder(index);
                    (q.embedder.as_deref(), q.problem.clone())
                };
                let retrieved = retrieve(
                    index,
                    embedder.map(|e| e as &dyn Embedder),
                    &question,
                    passage.as_deref(),
                    &opts,
                    inner.root.as_deref(),
                );
                retrieved.map(|r| (r, problem))
            })
            .await??
        };
        let fallback_reason = match (&retrieved.fallback_reason, embedder_problem) {
            (Some(_), Some(problem)) => Some(problem),
            (reason, _) => reason.clone(),
        };
        let passages = retrieved.passages;
        events
            .send(AskEvent::Sources(SourcesEvent {
                sources: passages.clone(),
            }))
            .await;

        let mut report = AskReport {
            question: r.question.clone(),
            answer: String::new(),
            mode: r.mode,
            language: r.language,
            degraded: false,
            degraded_reason: None,
            refusal: None,
            clamped: false,
            truncated: false,
            citations: Vec::new(),
            dropped_citations: 0,
            provider: "extractive".into(),
            model: "extractive".into(),
            streamed: false,
            loop_cut: false,
            saved_chars: 0,
            loop_detector: None,
            llm_error: None,
            repairs: Vec::new(),
            retrieval: RetrievalInfo {
                requested: r.retrieval.name().into(),
                used: retrieved.used.name().into(),
                fallback_reason,
                k: r.k,
            },
            hyde: hyde.map(|h| HydeInfo {
                passage: h.passage,
                cached: h.cached,
                fallback_reason: h.fallback_reason,
                query_vector: qv_mode.as_str().into(),
            }),
            passages: passages
                .iter()
                .map(|p| PassageInfo {
                    source: p.source.clone(),
                    start_line: p.start_line,
                    end_line: p.end_line,
                    score: p.score,
                })
                .collect(),
            notes: Vec::new(),
        };

        let status = match client {
            Some(client) => {
                self.synthesize(client, &r, &passages, &mut report, events)
                    .await
            }
            None => {
                let ex = extractive_answer(&passages, r.language, ExtractiveReason::NoLlm);
                report.answer = ex.answer;
                report.citations = ex.citations;
                AskStatus::Answered
            }
        };
        if events.deltas == 0 {
            let text = report.answer.clone();
            events.delta(&text);
        }
        events.flush().await;
        events.send(AskEvent::Done(Box::new(report.clone()))).await;
        Ok(AskOutcome { report, status })
    }

    /// The LLM answer into `report`; an LLM failure becomes an extractive
    /// answer that says so.
    pub(super) async fn synthesize(
        &self,
        client: &LlmClient,
        r: &Resolved,
        passages: &[Passage],
        report: &mut AskReport,
        events: &mut Events,
    ) -> AskStatus {
        let s = &self.inner.settings;
        report.provider = self.inner.provider.into();
        report.model = client.model().into();
        let opts = AnswerOptions {
            mode: r.mode,
            language: r.language,
            stream: r.stream,
            timeout: s.answer_timeout,
            max_output_tokens: s.max_output_tokens,
            temperature: s.temperature,
            guards: s.guards.clone(),
            history: r.history.clone(),
        };
        // Cancels the request when this future is dropped (the client went
        // away), besides the connection closing with it.
        let cancel = deloop_llm::CancellationToken::new();
        let _cancel_on_drop = cancel.clone().drop_guard();
        let result = synthesize(client, &r.question, passages, &opts, &cancel, |text| {
            events.delta(text)
        })
        .await;
        match result {
            Ok(a) => {
                let mut s = a.synthesis;
                // The seed's one-line fallback helps nobody when the
                // passages that answer the question are at hand: show them,
                // under a note that says what failed.
                if let Some(reason) = extractive_after(s.degraded_reason) {
                    if !passages.is_empty() {
                        let ex = extractive_answer(passages, r.language, reason);
                        s.answer = ex.answer;
                        s.citations = ex.citations;
                        s.dropped_citations = 0;
                    }
                }
                report.answer = s.answer;
                report.degraded = s.degraded;
                report.degraded_reason = s.degraded_reason.map(|r| {
                    serde_json::to_value(r)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default()
                });
                report.refusal = s.refusal;
                report.clamped = s.clamped;
                report.truncated = s.truncated;
                report.citations = s.citations;
                report.dropped_citations = s.dropped_citations;
                report.repairs = s.repairs;
                report.model = a.model;
                report.streamed = a.streamed;
                report.loop_cut = a.loop_cut;
                report.saved_chars = a.saved_chars;
                if let Some(cut) = a.loop_report.filter(|_| a.loop_cut) {
                    events.flush().await;
                    let detector = serde_json::to_value(cut.detector)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default();
                    // A loop mid-stream is an upstream fault like the
                    // others: the answer kept is the part before the loop.
                    report.degraded = true;
                    if report.degraded_reason.is_none() {
                        report.degraded_reason = Some("loop_cut".into());
                    }
                    report.llm_error = Some(format!(
                        "the model looped mid-stream ({detector} detector, from character {}); \
                         the stream was cut there and the request cancelled",
                        cut.start
                    ));
                    report.loop_detector = Some(detector.clone());
                    events
                        .send(AskEvent::Cut(CutEvent {
                            detector,
                            start: cut.start,
                            saved_chars: a.saved_chars,
                        }))
                        .await;
                }
                match s.degraded_reason {
                    Some(DegradedReason::NothingRescued) => AskStatus::NothingRescued,
                    _ if report.clamped || report.loop_cut => AskStatus::LoopCut,
                    _ => AskStatus::Answered,
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "the LLM call failed; answering extractively");
                let ex = extractive_answer(passages, r.language, ExtractiveReason::LlmFailed);
                report.answer = ex.answer;
                report.citations = ex.citations;
                report.degraded = true;
                report.degraded_reason = Some("llm_failed".into());
                report.llm_error = Some(e.to_string());
                AskStatus::LlmFailed
            }
        }
    }
}

/// The extractive answer that replaces a degraded reply, when passages
/// were retrieved: a reply with nothing to rescue, or one a loop guard cut
/// too short. A refusal stays a refusal.
pub(super) fn extractive_after(reason: Option<DegradedReason>) -> Option<ExtractiveReason> {
    match reason? {
        DegradedReason::NothingRescued => Some(ExtractiveReason::NothingRescued),
        DegradedReason::LoopTooShort => Some(ExtractiveReason::LoopCut),
        DegradedReason::Refused => None,
    }
}
