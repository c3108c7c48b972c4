//! The views: one module per output format, each reading the same `model` values the pass
//! produced, never the pass itself. `text` (fitted to the width by `screen`, its rows chosen by
//! `rows`, its frames by `frames`), `markdown`, `json`, `html` (its page template, script and
//! styles in `views/html/`), the stack formats over the model's `Profile` (`folded`,
//! `flamegraph`, `pprof`, `speedscope`) and the timeline as data (`timeline_data`).

pub mod flamegraph;
pub mod folded;
pub mod frames;
pub mod html;
pub mod json;
pub mod markdown;
pub mod pprof;
pub mod rows;
pub mod screen;
pub mod speedscope;
pub mod text;
pub mod timeline_data;
