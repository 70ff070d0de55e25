//! agentd-engine (to be written).
