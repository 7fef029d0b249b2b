//! The WebSocket event source of a monitor: every text frame is one event.

use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::error::ShellError;

pub use task_protocol::start::WsTarget;

/// Checks the URL's scheme, so a typo is refused before a monitor starts
/// ([`WsTarget::check_scheme`]).
///
/// # Errors
/// [`ShellError::NotWebSocket`] unless the URL starts with `ws://` or `wss://`.
pub fn validate(target: &WsTarget) -> Result<(), ShellError> {
    target
        .check_scheme()
        .map_err(|task_protocol::start::NotWebSocket(url)| ShellError::NotWebSocket(url))
}

/// The event line that stands for a binary frame of `len` bytes.
pub fn binary_placeholder(len: usize) -> String {
    format!("[binary frame: {len} bytes]")
}

/// Connects to `target` and calls `on_event` with every data frame, in order, until the peer
/// closes the socket (`Ok`) or the connection fails (`Err`).
pub(crate) async fn stream_events(
    target: &WsTarget,
    mut on_event: impl FnMut(String),
) -> Result<(), ShellError> {
    let ws_error = |source: WsError| ShellError::WebSocket {
        url: target.url.clone(),
        source: Box::new(source),
    };
    let mut request = target
        .url
        .as_str()
        .into_client_request()
        .map_err(ws_error)?;
    if !target.protocols.is_empty() {
        let offered = HeaderValue::from_str(&target.protocols.join(", ")).map_err(|_| {
            ShellError::InvalidProtocols {
                protocols: target.protocols.clone(),
            }
        })?;
        request
            .headers_mut()
            .insert(SEC_WEBSOCKET_PROTOCOL, offered);
    }
    let (mut socket, _response) = tokio_tungstenite::connect_async(request)
        .await
        .map_err(ws_error)?;
    tracing::debug!(url = %target.url, "monitor websocket connected");
    while let Some(message) = socket.next().await {
        match message {
            Ok(Message::Text(text)) => on_event(text.as_str().to_owned()),
            Ok(Message::Binary(bytes)) => on_event(binary_placeholder(bytes.len())),
            Ok(Message::Close(_)) => break,
            Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => {}
            Err(WsError::ConnectionClosed | WsError::AlreadyClosed) => break,
            Err(error) => return Err(ws_error(error)),
        }
    }
    Ok(())
}
