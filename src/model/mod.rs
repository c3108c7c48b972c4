//! The report's model: plain values the one pass over a recording produces and every view
//! reads, the JSON schema of `report --format json` (docs/report-schema.md). It imports only
//! `format` (the recorded values it quotes), never the pass, the views or the commands, so a
//! view can change without touching the accounting and back.

pub mod functions;
pub mod measure;
pub mod metric;
pub mod metrics;
pub mod profile;
pub mod rmap;
pub mod sites;
pub mod timeline;
