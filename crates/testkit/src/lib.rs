//! agentd-testkit (to be written).
