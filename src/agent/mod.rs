//! The agent adapter: how Claude Code is invoked, how its stream-json is read, and how an
//! outcome is classified.
