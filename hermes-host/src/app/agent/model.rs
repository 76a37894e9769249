//! One request to the scripted model: what it is sent (the history, this pass's input with
//! any injected context, the tools) after `llm_request` middleware, how it answers (the
//! script's step, through `llm_execution` middleware, which may change the answer or give
//! its own), and what `pre_api_request` / `post_api_request` show of both.
//!
//! Nothing here is built when nobody reads it: without API hooks or model middleware a
//! request is only its size, so a long chat's history is never copied per request.

use serde_json::{Map, Value, json};

use hermes_hooks_abi::hooks::payload::{ApiRequestEvent, ApiResponseEvent};
use hermes_host::middleware::Kind;
use hermes_host::registry::Registry;

use super::script::{Step, ToolCall};
use super::tools;

/// A request, as JSON texts for the hooks and as the value middleware saw.
#[derive(Default)]
pub(super) struct Request {
    /// The conversation before this request (`conversation_history`).
    pub history: String,
    /// The messages sent, after middleware (`request_messages`).
    pub messages: String,
    /// `{"method": "POST", "body": ...}` (`request`).
    pub request: String,
    /// The request's size in characters.
    pub chars: usize,
    /// The body sent: `{"model", "messages", "tools"}`, after middleware.
    pub body: Value,
    /// The body before middleware.
    pub original: Value,
    /// What `llm_request` middleware did (`middleware_trace`).
    pub trace: Vec<Value>,
    /// An `llm_request` middleware's own answer: the model is not asked.
    pub answered: Option<Value>,
}

/// The model's answer to one request.
pub(super) struct Response {
    /// Its text, when it answered without tool calls.
    pub content: Option<String>,
    /// The tool calls it asks for.
    pub calls: Vec<ToolCall>,
}

/// What `post_api_request` shows of a response (JSON texts; empty when no hook reads them).
#[derive(Default)]
pub(super) struct Shown {
    pub message: String,
    pub response: String,
    pub content_chars: i64,
}

/// Builds the request of one pass: the session's `system` prompt (the plugins' sections),
/// the history, with `model_input` as its last user message (the user's message with
/// context, or a Stop hook's reason), run through `llm_request` middleware with the call's
/// `context`.
pub(super) fn request(
    registry: &Registry,
    system: Option<&str>,
    history: &[Value],
    model: &str,
    model_input: &str,
    context: &Map<String, Value>,
) -> Request {
    let chain = registry.middleware();
    let wanted = registry.has(ApiRequestEvent::HOOK)
        || chain.has(Kind::LlmRequest)
        || chain.has(Kind::LlmExecution);
    if !wanted {
        return Request {
            chars: model_input.len() + system.map_or(0, str::len),
            ..Request::default()
        };
    }
    let mut messages = history.to_vec();
    let history = serde_json::to_string(&messages).unwrap_or_else(|_| "[]".into());
    match messages.iter_mut().rev().find(|m| m["role"] == "user") {
        Some(last) => last["content"] = json!(model_input),
        None => messages.push(json!({ "role": "user", "content": model_input })),
    }
    if let Some(system) = system {
        messages.insert(0, json!({ "role": "system", "content": system }));
    }
    let offered: Vec<&str> = tools::NAMES
        .iter()
        .copied()
        .chain(registry.tools().specs().map(|s| s.name.as_str()))
        .collect();
    let body = json!({ "model": model, "messages": messages, "tools": offered });
    let rewritten = chain.rewrite(Kind::LlmRequest, body, context);
    let chars = rewritten.payload["messages"].as_array().map_or(0, |m| {
        m.iter()
            .map(|m| m["content"].as_str().map_or(0, str::len))
            .sum()
    });
    Request {
        history,
        messages: rewritten.payload["messages"].to_string(),
        request: json!({ "method": "POST", "body": rewritten.payload }).to_string(),
        chars,
        body: rewritten.payload,
        original: rewritten.original,
        trace: rewritten.trace,
        answered: rewritten.response,
    }
}

/// The model's answer: an `llm_request` middleware's own, else the step as scripted,
/// through `llm_execution` middleware. A
/// wrapper may pass on a changed request, change the answer, or answer itself (a cache);
/// an answer is `{"content", "tool_calls": [{"name", "arguments"}]}` or a text.
///
/// # Errors
///
/// The step's scripted provider error, or a middleware's.
pub(super) fn answer(
    registry: &Registry,
    step: &Step,
    request: &Request,
    context: &Map<String, Value>,
) -> Result<Response, String> {
    let mut scripted = |_: Value| -> Result<Value, String> {
        match &step.error {
            Some(failure) => Err(failure.clone()),
            None => Ok(scripted_answer(step)),
        }
    };
    if let Some(answered) = &request.answered {
        return Ok(response_of(answered));
    }
    let chain = registry.middleware();
    let value = if chain.has(Kind::LlmExecution) {
        chain.execute(
            Kind::LlmExecution,
            request.body.clone(),
            &request.original,
            context,
            &mut scripted,
        )?
    } else {
        scripted(Value::Null)?
    };
    Ok(response_of(&value))
}

/// A scripted step as the answer a provider gives.
fn scripted_answer(step: &Step) -> Value {
    let calls = step.calls();
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|c| json!({ "name": c.tool, "arguments": c.args }))
        .collect();
    let content = if calls.is_empty() {
        json!(step.final_answer().unwrap_or_default())
    } else {
        Value::Null
    };
    json!({
        "content": content,
        "tool_calls": tool_calls,
        "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" },
    })
}

/// An answer as the agent uses it; `arguments` may be an object or its JSON text, and a
/// call may be in the OpenAI shape (`{"function": {"name", "arguments"}}`).
fn response_of(value: &Value) -> Response {
    if let Some(text) = value.as_str() {
        return Response {
            content: Some(text.to_string()),
            calls: Vec::new(),
        };
    }
    let calls: Vec<ToolCall> = value["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .filter_map(|c| {
                    let f = if c["function"].is_object() {
                        &c["function"]
                    } else {
                        c
                    };
                    let tool = f["name"].as_str()?.to_string();
                    let args = match &f["arguments"] {
                        Value::String(text) => serde_json::from_str(text).unwrap_or(json!({})),
                        Value::Null => json!({}),
                        other => other.clone(),
                    };
                    Some(ToolCall { tool, args })
                })
                .collect()
        })
        .unwrap_or_default();
    let content = value["content"].as_str().map(str::to_string);
    Response {
        content: if calls.is_empty() {
            Some(content.unwrap_or_default())
        } else {
            content
        },
        calls,
    }
}

/// What `post_api_request` shows of `response`.
pub(super) fn shown(
    registry: &Registry,
    model: &str,
    response: &Response,
    finish_reason: &str,
) -> Shown {
    let content = response
        .content
        .as_deref()
        .filter(|_| response.calls.is_empty());
    let content_chars = content.map_or(0, |c| c.chars().count() as i64);
    if !registry.has(ApiResponseEvent::HOOK) {
        return Shown {
            content_chars,
            ..Shown::default()
        };
    }
    let tool_calls: Vec<Value> = response
        .calls
        .iter()
        .map(|c| json!({ "type": "function", "function": { "name": c.tool, "arguments": c.args.to_string() } }))
        .collect();
    let message = json!({ "role": "assistant", "content": content, "tool_calls": tool_calls });
    let shown = json!({
        "model": model,
        "finish_reason": finish_reason,
        "assistant_message": message,
        "usage": null,
    });
    Shown {
        message: message.to_string(),
        response: shown.to_string(),
        content_chars,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_in_either_shape_read_the_same() {
        let openai = response_of(
            &json!({"content": null, "tool_calls": [{"type": "function", "function": {"name": "terminal", "arguments": "{\"command\": \"ls\"}"}}]}),
        );
        let plain = response_of(
            &json!({"tool_calls": [{"name": "terminal", "arguments": {"command": "ls"}}]}),
        );
        for r in [openai, plain] {
            assert_eq!(r.calls.len(), 1);
            assert_eq!(
                (r.calls[0].tool.as_str(), &r.calls[0].args),
                ("terminal", &json!({"command": "ls"}))
            );
        }
        let text = response_of(&json!("cached answer"));
        assert_eq!(
            (text.content.as_deref(), text.calls.len()),
            (Some("cached answer"), 0)
        );
    }
}
