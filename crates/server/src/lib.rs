//! agentd-server (to be written).
