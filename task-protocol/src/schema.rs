//! The JSON Schema of the wire (feature `schema`): every request and answer, and the typed
//! start requests, as definitions of one document. The repository keeps it as
//! `task-protocol/wire.schema.json`; a test checks that the file is what this builds.

use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use crate::start::{
    AgentStart, DreamStart, MonitorStart, RemoteStart, ShellStart, StartRequest, TeammateStart,
    WorkflowStart,
};
use crate::wire::{OLDEST_SERVED_VERSION, PROTOCOL_VERSION, Request, Response};

/// The wire's schema: a document whose `$defs` hold [`Request`], [`Response`] and the typed
/// start requests, with the protocol's version and its framing.
pub fn wire() -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let roots = [
        ("Request", generator.subschema_for::<Request>()),
        ("Response", generator.subschema_for::<Response>()),
        ("ShellStart", generator.subschema_for::<ShellStart>()),
        ("MonitorStart", generator.subschema_for::<MonitorStart>()),
        ("AgentStart", generator.subschema_for::<AgentStart>()),
        ("TeammateStart", generator.subschema_for::<TeammateStart>()),
        ("DreamStart", generator.subschema_for::<DreamStart>()),
        ("WorkflowStart", generator.subschema_for::<WorkflowStart>()),
        ("RemoteStart", generator.subschema_for::<RemoteStart>()),
    ];
    let kinds: serde_json::Map<String, Value> = [
        (ShellStart::KIND, "ShellStart"),
        (MonitorStart::KIND, "MonitorStart"),
        (AgentStart::KIND, "AgentStart"),
        (TeammateStart::KIND, "TeammateStart"),
        (DreamStart::KIND, "DreamStart"),
        (WorkflowStart::KIND, "WorkflowStart"),
        (RemoteStart::KIND, "RemoteStart"),
    ]
    .into_iter()
    .map(|(kind, name)| (kind.to_owned(), json!(format!("#/$defs/{name}"))))
    .collect();
    let mut definitions = generator.take_definitions(true);
    for (name, schema) in roots {
        definitions.entry(name).or_insert_with(|| schema.to_value());
    }
    let definitions: serde_json::Map<String, Value> = definitions.into_iter().collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "The tasks supervisor's wire",
        "description": format!(
            "One JSON Request per line on the session's Unix socket ({{root}}/{{session}}/supervisor.sock), \
             one JSON Response line back, then the connection closes. A request carries the \
             protocol version its client speaks (this document: {PROTOCOL_VERSION}); a supervisor \
             serves versions {OLDEST_SERVED_VERSION} to {PROTOCOL_VERSION} and answers others \
             with Response `unsupported`. A Start's `request` is the typed request of its \
             `kind`, as x-start-kinds maps them."
        ),
        "x-protocol-version": PROTOCOL_VERSION,
        "x-start-kinds": kinds,
        "$defs": definitions,
    })
}
