//! The integration tests of `agentd-cli`, one module per area, in one test
//! binary: each `tests/*.rs` used to link its own 20–30 MB executable (21 of
//! them, ~450 MB and 21 links per build), which ran CI out of disk. Tests of
//! all modules run in parallel threads of this one process, so none may rely
//! on a process of its own (environment, globals, fixed ports or paths).
//! Run one area with `cargo test -p agentd-cli --test cli <module>::`.

mod chat_screen;
mod run_harness;
mod run_images;
mod serve_harness;

mod acp;
mod agent_sdk;
mod agent_sdk_ts;
mod ai_sdk;
mod anthropic_api;
mod chat;
mod chat_remote;
mod claude_code_backend;
mod claude_code_engine;
mod claude_code_failures;
mod cli;
mod cli_history;
mod gc;
mod golden_events;
mod mcp_server;
mod oidc_accounts;
mod run;
mod run_agent_setup;
mod run_claude_flags;
mod run_mcp_read_only;
mod run_postgres;
mod run_sandbox_exe;
mod run_stream_input;
mod run_terminal;
mod schemathesis;
mod serve_agent_tools;
mod serve_agent_uids;
mod serve_approvals;
mod serve_attachments;
mod serve_auth;
mod serve_background;
mod serve_cluster;
mod serve_cluster_fence;
mod serve_cluster_pause;
mod serve_commands;
mod serve_connections;
mod serve_db_down;
mod serve_disk_full;
mod serve_egress;
mod serve_egress_programs;
mod serve_files_race;
mod serve_guardrails;
mod serve_history;
mod serve_input;
mod serve_mcp;
mod serve_model_switch;
mod serve_mounts;
mod serve_mounts_races;
mod serve_output_limits;
mod serve_permission_mode;
mod serve_postgres;
mod serve_project;
mod serve_quotas;
mod serve_routes;
mod serve_sandbox_env;
mod serve_search;
mod serve_shutdown;
mod serve_special_files;
mod serve_sso;
mod serve_stream;
mod serve_stream_conn;
mod serve_team;
mod serve_tool_identity;
mod serve_web_auth;
mod serve_webhooks;
mod serve_workspaces;
mod web_commands;
mod web_notify;
mod web_oidc;
mod web_search;
mod web_ui;
