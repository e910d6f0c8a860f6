//! Helpers shared by the integration tests (`mod support;`). Each test binary uses a part.
#![allow(dead_code)]

pub mod telegram_fake;
