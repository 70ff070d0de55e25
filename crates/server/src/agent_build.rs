//! Building a session's [`Agent`] from its profile: model, tools (built-in,
//! skills, MCP), sandbox policy, permission rules, hooks, subagents and the
//! system prompt.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agentd_engine::prompt::{PromptContext, render, system_prompt, today};
use agentd_engine::{
    Agent, AgentConfig, SpendCap, SubagentDef, SubagentModel, Subagents, TurnLimits,
};
use agentd_policy::hooks::{HookContext, Hooks};
use agentd_policy::permissions::{PermissionPolicy, ToolCallView, Verdict};
use agentd_sandbox::confined::FsIdentity;
use agentd_sandbox::{PathGuard, Policy};
use agentd_store::SessionRecord;
use agentd_tools::command::CommandTool;
use agentd_tools::egress::{EgressAllowlist, NetworkRefusals};
use agentd_tools::{
    BackgroundShells, HiddenPaths, SkillSet, SkillTool, ToolContext, ToolRegistry, UrlCheck,
    UrlVerdict, WebPolicy, builtin_tools,
};
use tokio_util::sync::CancellationToken;

use crate::approvals::{NoAnswerPolicy, StoredApprover};
use crate::checkpoints::SessionCheckpointer;
use crate::config::{ConfigError, ProfileConfig, SandboxEnv, SandboxMode};
use crate::models::{EnvLookup, ResolvedModel, resolve_model};
use crate::project::{Project, ProjectAgent, SlashCommands};
use crate::runtime::{RunError, Runtime, TurnOptions};
use crate::workspace_open::OpenWorkspace;

impl Runtime {
    /// The session's agent on `model`, resolved by the caller once per turn.
    pub(crate) async fn agent_for(
        &self,
        session: &SessionRecord,
        options: &TurnOptions,
        env: EnvLookup<'_>,
        turn_position: Arc<OnceLock<i64>>,
        model: ResolvedModel,
    ) -> Result<(Agent, SlashCommands), RunError> {
        let profile = self.config.profile(&session.profile)?;
        let workspace = PathBuf::from(&session.workspace);
        let (mut skills, warnings) = self.skills_for(&session.owner);
        for warning in warnings {
            tracing::warn!(session = %session.id, "skills: {warning}");
        }
        // A root server runs the agent as its owner's own uid: the
        // workspace must be theirs before anything runs in it.
        let identity = self.agent_identity(&session.owner).await?;
        let owner_spend = self.access().owner_spend_cap(&session.owner).await?;
        let (guard, mut policy, opened) = self
            .confinement(session, &profile, &skills, identity, env)
            .await?;
        let egress = self.egress_for(session, &profile, &mut policy)?;
        // The policy is final: a first command's sandbox (`agentd run`,
        // `agentd claude`) starts now, beside the rest of the build and the
        // first model call, unless `Bash` will not be offered as far as is
        // known yet (the profile, `--tools`, the mode and the deny rules
        // given so far). The spare serves only a command of this policy.
        if options.prestart_sandbox && may_offer_bash(&profile, options) {
            self.sandbox.prestart(&policy);
        }
        let policy_pin = policy.workspace_pin;
        let project = self
            .project_for(
                session,
                &profile,
                options,
                opened.root.clone(),
                identity,
                opened.existing,
            )
            .await;
        for taken in skills.add_missing(project.skills.iter().cloned()) {
            tracing::warn!(session = %session.id, "project skill {taken:?} skipped: the name is taken");
        }
        let mut tools = self
            .tools_for(session, &profile, &skills, &policy, &project, options)
            .await;
        let commands = self
            .config
            .commands_for(&profile)
            .map_err(ConfigError::Invalid)?;
        // Their `env`s get `{user}`, `{session}` and a fresh `{user_token}`
        // at each run.
        let command_env: Arc<dyn agentd_tools::command::EnvFiller> = Arc::new(
            crate::tool_identity::SessionEnv::new(self, &session.owner, &session.id),
        );
        tools.extend(commands.iter().map(|spec| {
            Arc::new(CommandTool::new(spec.clone()).with_env(command_env.clone())) as _
        }));

        // The project's rules come under the operator's: deny (the
        // operator's included) beats every allow.
        let mut allow = profile.allow.clone();
        allow.extend(project.allow.iter().cloned());
        allow.extend(options.allow.iter().cloned());
        allow.extend(self.store.session_rules(&session.id).await?);
        let mode = options.permission_mode.unwrap_or(profile.mode);
        let mut deny = profile.deny.clone();
        deny.extend(options.deny.iter().cloned());
        deny.extend(project.deny.iter().cloned());
        let mut ask = profile.ask.clone();
        ask.extend(project.ask.iter().cloned());
        ask.extend(options.ask.iter().cloned());
        let permissions = PermissionPolicy::new(mode, &allow, &deny, &ask)
            .map_err(|err| ConfigError::Invalid(format!("permission rules: {err}")))?;
        let permissions = crate::config::with_command_marks(permissions, &commands);
        let tools = offered(tools, &permissions, &profile);
        // Searches must not reveal what a Read deny rule protects.
        let hidden = {
            let (rules, root) = (permissions.clone(), guard.workspace().to_path_buf());
            HiddenPaths::new(move |path| rules.read_denied_by(path, &root).is_some())
        };
        // Only the operator's own rules may open private addresses, never
        // one remembered from an approval or given for a single run.
        let mut web = web_policy(&profile.allow, &permissions, guard.workspace());
        if let Some((list, refusals)) = &egress {
            web = crate::egress::web_within(web, list, refusals.clone());
        }

        let mut names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        names.extend(["TodoWrite", "AskUserQuestion"]);
        let date = today();
        let skills_section = skills.prompt_section();
        let prompt_context = PromptContext {
            workspace: guard.workspace(),
            tools: &names,
            network: policy.network,
            network_allow: match (&profile.network, &policy.egress) {
                (crate::config::NetworkConfig::Allow(list), Some(_)) => Some(&list.allow),
                _ => None,
            },
            sandboxed: !policy.unsandboxed,
            permission_mode: mode.name(),
            allow_rules: &allow,
            deny_rules: &deny,
            ask_rules: &ask,
            skills: skills_section.as_deref(),
            subagents: None,
            date: &date,
            instructions: project.instructions.as_deref(),
            files: Some(&project.files),
        };
        let (system_prompt, subagents) =
            self.prompt_for(session, &profile, options, env, prompt_context, &project)?;
        let sandbox_for_hooks = policy.clone();

        let context = ToolContext {
            hidden,
            policy,
            guard,
            sandbox: self.sandbox.clone(),
            output: None,
            cancel: CancellationToken::new(),
            bash_timeout: Duration::from_secs(profile.bash_timeout_s),
            bash_max_timeout: Duration::from_secs(profile.bash_max_timeout_s),
            result_cap: agentd_tools::DEFAULT_RESULT_CAP,
            web,
            background: if self.coordination.sees_all_turns() {
                let idle = Duration::from_secs(profile.background_idle_timeout_s);
                self.background
                    .for_session(&session.id, idle, session.last_seq)
            } else {
                // The session's next turn may run on another node, which
                // could neither read nor stop them.
                BackgroundShells::unavailable("in a cluster, run long commands in the foreground")
            },
            network_refusals: egress.map(|(_, refusals)| refusals),
        };
        let limits = turn_limits(&profile, options, session, owner_spend, &model);
        let config = AgentConfig {
            price: model.price,
            model_name: model.model_name,
            system_prompt,
            limits,
        };
        let approver = self.approver_for(session, &profile, options);
        let mut hook_configs = profile.hooks.clone();
        hook_configs.extend(project.hooks.iter().cloned());
        // A client's hooks are its callbacks, never commands of its choosing.
        let client_hooks = options.hooks.iter().filter(|hook| hook.callback.is_some());
        hook_configs.extend(client_hooks.cloned());
        let (hooks, mut hook_context) =
            hooks_for(session, hook_configs, workspace, identity, policy_pin)?;
        if !project.hooks.is_empty() {
            hook_context.sandbox = Some(sandbox_for_hooks);
        }
        let agent = Agent::new(model.client, tools, context, config)
            .with_permissions(permissions, Arc::new(approver))
            .with_hooks(hooks, hook_context);
        if let Some(slot) = &options.policy_slot {
            slot.fill(agent.permission_policy());
        }
        let agent = if profile.checkpoints {
            agent.with_checkpointer(Arc::new(SessionCheckpointer::new(
                self.store.clone(),
                session.id.clone(),
                opened.root.clone(),
                opened.reader(identity),
                turn_position,
            )))
        } else {
            agent
        };
        let agent = match subagents {
            Some(subagents) => agent.with_subagents(subagents),
            None => agent,
        };
        Ok((agent, project.commands))
    }

    /// The workspace opened for the turn (see [`crate::workspace_open`]),
    /// its path guard, and the sandbox policy of its commands.
    pub(crate) async fn confinement(
        &self,
        session: &SessionRecord,
        profile: &ProfileConfig,
        skills: &SkillSet,
        identity: Option<FsIdentity>,
        host_env: EnvLookup<'_>,
    ) -> Result<(PathGuard, Policy, OpenWorkspace), RunError> {
        let opened = self.open_workspace(session, identity).await?;
        let pin = opened.root.identity().map_err(|err| RunError::Workspace {
            path: opened.root.path().to_path_buf(),
            message: format!("cannot be opened: {err}"),
        })?;
        let mounts = self.mounts_for(session, profile, identity).await?;
        // Skill folders are read through the Skill tool and are visible,
        // read-only, in the sandbox (for their scripts); the file tools'
        // roots are the workspace and the host mounts.
        let guard = PathGuard::from_root(opened.root.clone())
            .with_mounts(&mounts)
            .map_err(|err| ConfigError::Invalid(format!("host mounts: {err}")))?
            .with_identity(identity);
        let mut policy = Policy::new(guard.workspace());
        policy.run_as = identity;
        policy.read_only_paths.extend(skills.dirs());
        policy.mounts = mounts;
        policy.network = profile.network.shares_host();
        policy.unsandboxed = profile.sandbox == SandboxMode::Off;
        policy.allow_git_config = profile.allow_git_config;
        let user = self.config.users.get(&session.owner);
        let sandbox_env = SandboxEnv::resolve(profile, user, host_env);
        (policy.env, policy.secret_env) = sandbox_env.split();
        policy.ssh_agent = sandbox_env.ssh_agent;
        policy.workspace_pin = Some(pin);
        Ok((guard, policy, opened))
    }

    /// With a network allowlist, the session's egress proxy for `policy`,
    /// the list, and where its refusals collect (the proxy's, WebFetch's).
    pub(crate) fn egress_for(
        &self,
        session: &SessionRecord,
        profile: &ProfileConfig,
        policy: &mut Policy,
    ) -> Result<Option<(EgressAllowlist, NetworkRefusals)>, RunError> {
        let Some(list) = profile.network.allowlist() else {
            return Ok(None);
        };
        if policy.unsandboxed {
            // Config refuses this; never let an unsandboxed command think
            // it is held to a list.
            return Err(
                ConfigError::Invalid("a network allowlist needs the sandbox".into()).into(),
            );
        }
        let (bridge, refusals) = self
            .egress
            .for_session(&session.id, list.clone())
            .map_err(|err| ConfigError::Invalid(format!("cannot start the egress proxy: {err}")))?;
        policy.egress = Some(bridge);
        Ok(Some((list, refusals)))
    }

    /// Who answers the agent's permission requests and questions.
    fn approver_for(
        &self,
        session: &SessionRecord,
        profile: &ProfileConfig,
        options: &TurnOptions,
    ) -> StoredApprover {
        StoredApprover {
            store: self.store.clone(),
            session_id: session.id.clone(),
            approvals: self.approvals.clone(),
            no_answer: NoAnswerPolicy {
                decision: profile.on_no_answer,
                after: Duration::from_secs(profile.approval_timeout_s),
            },
            source: options.answers.clone(),
            prepared: Default::default(),
            prepared_questions: Default::default(),
            open: Default::default(),
            // The worker names the turn (and holds its lease) before it runs.
            fence: options
                .turn_id
                .as_deref()
                .and_then(|turn_id| self.fence_for(turn_id)),
        }
    }

    /// The built-in tools, the Skill tool when there are skills, the
    /// profile's MCP servers' tools, and those of the project's servers
    /// whose names no other tool has.
    async fn tools_for(
        &self,
        session: &SessionRecord,
        profile: &ProfileConfig,
        skills: &SkillSet,
        policy: &Policy,
        project: &Project,
        options: &TurnOptions,
    ) -> ToolRegistry {
        let mut tools = builtin_tools();
        if let Some(only) = &options.builtin_tools {
            tools = tools.only(only);
        }
        if !skills.is_empty() {
            tools.extend([Arc::new(SkillTool::new(skills.clone())) as _]);
        }
        let mut pools = self.mcp.for_profile(self, session, profile).await;
        pools.extend(self.mcp.for_project(&session.id, project).await);
        pools.extend(options.mcp.clone());
        for pool in pools {
            let mcp = pool.tools(&session.id, policy).await;
            for error in &mcp.errors {
                tracing::warn!(session = %session.id, "{error}");
            }
            let taken: Vec<String> = tools.iter().map(|t| t.name().to_string()).collect();
            tools.extend(
                mcp.tools
                    .into_iter()
                    .filter(|tool| !taken.iter().any(|name| name == tool.name())),
            );
        }
        tools
    }

    /// The system prompt, and the subagents it lists (their prompts see the
    /// same workspace, sandbox and rules).
    fn prompt_for(
        &self,
        session: &SessionRecord,
        profile: &ProfileConfig,
        options: &TurnOptions,
        env: EnvLookup<'_>,
        prompt_context: PromptContext<'_>,
        project: &Project,
    ) -> Result<(String, Option<Subagents>), RunError> {
        let subagents = if profile.max_subagent_depth > 0 && profile_offers(profile, "Task") {
            // The client's own (an Agent SDK app's `agents`) after the
            // project's; a name already taken is skipped.
            let agents = [&project.agents[..], &options.agents[..]].concat();
            Some(self.subagents(profile, &prompt_context, env, &agents)?)
        } else {
            None
        };
        let subagents_section = subagents.as_ref().map(Subagents::listing);
        let mut all_names = prompt_context.tools.to_vec();
        if subagents.is_some() {
            all_names.push("Task");
        }
        let prompt_context = PromptContext {
            tools: &all_names,
            subagents: subagents_section.as_deref(),
            ..prompt_context
        };
        let system = options
            .system_prompt
            .as_deref()
            .or(profile.system_prompt.as_deref());
        let append = join_appends(
            profile.append_system_prompt.as_deref(),
            options.append_system_prompt.as_deref(),
        );
        let system_prompt = system_prompt(system, append.as_deref(), &prompt_context)
            .map_err(|err| ConfigError::Invalid(format!("profile {:?}: {err}", session.profile)))?;
        Ok((system_prompt, subagents))
    }

    /// The global skills, overridden by `user`'s own.
    pub(crate) fn skills_for(&self, user: &str) -> (SkillSet, Vec<String>) {
        let global = self
            .config
            .skills
            .dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("skills"));
        let user_dir = match &self.config.skills.user_dir {
            Some(template) => PathBuf::from(template.replace("{user}", user)),
            None => self.data_dir.join("users").join(user).join("skills"),
        };
        SkillSet::discover(Some(&global), Some(&user_dir))
    }

    /// The model `name` gives a subagent; `None` is its parent's.
    fn subagent_model(
        &self,
        name: Option<&str>,
        env: EnvLookup<'_>,
    ) -> Result<Option<SubagentModel>, RunError> {
        let Some(name) = name else { return Ok(None) };
        let resolved = resolve_model(&self.config, Some(name), env)?;
        Ok(Some(SubagentModel {
            client: resolved.client,
            model_name: resolved.model_name,
        }))
    }

    fn subagents(
        &self,
        profile: &ProfileConfig,
        context: &PromptContext<'_>,
        env: EnvLookup<'_>,
        project_agents: &[ProjectAgent],
    ) -> Result<Subagents, RunError> {
        let mut defs = Vec::with_capacity(self.config.subagents.len());
        for sub in &self.config.subagents {
            let prompt = render(&sub.prompt, context)
                .map_err(|err| ConfigError::Invalid(format!("subagent {:?}: {err}", sub.name)))?;
            let model = self.subagent_model(sub.model.as_deref(), env)?;
            defs.push(subagent_def(
                &sub.name,
                &sub.description,
                &prompt,
                sub.tools.clone(),
                model,
                context,
            ));
        }
        for agent in project_agents {
            if defs.iter().any(|def| def.name == agent.name) {
                tracing::warn!("project agent {:?} skipped: the name is taken", agent.name);
                continue;
            }
            // A model the operator configured under that name, else the parent's.
            let name = agent.model.as_deref();
            let model = name.filter(|name| self.config.models.contains_key(*name));
            let model = self.subagent_model(model, env)?;
            defs.push(subagent_def(
                &agent.name,
                &agent.description,
                &agent.prompt,
                agent.tools.clone(),
                model,
                context,
            ));
        }
        Ok(Subagents::new(
            defs,
            profile.max_subagents,
            profile.max_subagent_depth,
        ))
    }
}

/// A subagent type: its prompt told where it works and the date.
fn subagent_def(
    name: &str,
    description: &str,
    prompt: &str,
    tools: Option<Vec<String>>,
    model: Option<SubagentModel>,
    context: &PromptContext<'_>,
) -> SubagentDef {
    SubagentDef {
        name: name.to_string(),
        description: description.to_string(),
        prompt: format!(
            "{}\n\nYou work in {}; today is {}.",
            prompt.trim_end(),
            context.workspace.display(),
            context.date
        ),
        tools,
        model,
    }
}

/// The profile's hooks, and what they are told of the session.
fn hooks_for(
    session: &SessionRecord,
    configs: Vec<agentd_policy::hooks::HookConfig>,
    workspace: PathBuf,
    identity: Option<FsIdentity>,
    workspace_pin: Option<(u64, u64)>,
) -> Result<(Hooks, HookContext), RunError> {
    let hooks = Hooks::new(configs).map_err(|err| ConfigError::Invalid(format!("hooks: {err}")))?;
    let context = HookContext {
        session_id: session.id.clone(),
        cwd: workspace,
        transcript_path: None,
        env: Default::default(),
        run_as: identity,
        workspace_pin,
        sandbox: None,
    };
    Ok((hooks, context))
}

/// Whether `patterns` (tool names, or an MCP server's `mcp__server`) name `tool`.
fn names(patterns: &[String], tool: &str) -> bool {
    patterns.iter().any(|p| {
        p == tool
            || tool
                .strip_prefix(p.as_str())
                .is_some_and(|r| r.starts_with("__"))
    })
}

/// Whether the profile's tool lists leave `tool` in.
fn profile_offers(profile: &ProfileConfig, tool: &str) -> bool {
    profile
        .tools
        .as_deref()
        .is_none_or(|only| names(only, tool))
        && !names(&profile.disallowed_tools, tool)
}

/// Whether `Bash` may be offered, judged before the turn's agent is built:
/// the project's and the session's rules, not read yet, can only deny more
/// (or, in read-only mode, allow it: then the first command starts cold).
fn may_offer_bash(profile: &ProfileConfig, options: &TurnOptions) -> bool {
    if !profile_offers(profile, "Bash") || !options.offers_builtin("Bash") {
        return false;
    }
    let mode = options.permission_mode.unwrap_or(profile.mode);
    let allow: Vec<String> = profile
        .allow
        .iter()
        .chain(&options.allow)
        .cloned()
        .collect();
    let deny: Vec<String> = profile.deny.iter().chain(&options.deny).cloned().collect();
    // Rules that do not parse fail the turn later, with their reason.
    PermissionPolicy::new(mode, &allow, &deny, &[]).is_ok_and(|known| known.offers("Bash", false))
}

/// The tools the model is offered: the profile's `tools` (when set) less its
/// `disallowed_tools` and those every call of which would be denied; the
/// background companions only with `Bash`.
fn offered(
    tools: ToolRegistry,
    permissions: &PermissionPolicy,
    profile: &ProfileConfig,
) -> ToolRegistry {
    let mut kept: Vec<String> = tools
        .iter()
        .filter(|tool| {
            let name = tool.name();
            profile_offers(profile, name) && permissions.offers(name, tool.is_read_only())
        })
        .map(|tool| tool.name().to_string())
        .collect();
    if !kept.iter().any(|tool| tool == "Bash") {
        kept.retain(|tool| tool != "BashOutput" && tool != "KillShell");
    }
    tools.only(&kept)
}

/// The limits of the turn: the profile's, overridden by the turn's options.
/// The thinking budget: the session's own, else the profile's, else the model's.
fn turn_limits(
    profile: &ProfileConfig,
    options: &TurnOptions,
    session: &SessionRecord,
    owner_spend: Option<SpendCap>,
    model: &ResolvedModel,
) -> TurnLimits {
    TurnLimits {
        max_turns: options.max_turns.unwrap_or(profile.max_turns),
        turn_timeout: Duration::from_secs(profile.turn_timeout_s),
        max_budget_usd: options.max_budget_usd.or(profile.max_budget_usd),
        max_session_budget_usd: profile.max_session_budget_usd,
        session_spent_usd: session.cost_usd,
        owner_spend,
        max_failed_calls: profile.max_failed_calls,
        max_identical_calls: profile.max_identical_calls,
        max_output_tokens: model.max_output_tokens,
        // A message's own budget wins, then the session's, the profile's
        // and the model's; a budget of 0 turns thinking off.
        thinking_budget: options
            .thinking_budget
            .or(session.thinking_budget)
            .or(profile.thinking.map(|t| t.budget_tokens))
            .or(model.thinking_budget)
            .filter(|budget| *budget > 0),
        context_window: model.context_window,
        compact_threshold: profile.compact_threshold,
        max_tool_output_stream_bytes: profile.max_tool_output_stream_bytes,
        max_turn_stream_bytes: profile.max_turn_stream_bytes,
    }
}

fn join_appends(profile: Option<&str>, turn: Option<&str>) -> Option<String> {
    match (profile, turn) {
        (Some(a), Some(b)) => Some(format!("{a}\n\n{b}")),
        (a, b) => a.or(b).map(str::to_string),
    }
}

/// WebFetch's reach: hosts an allow rule names exactly may be private
/// addresses; each redirect to another host is judged by the same rules.
fn web_policy(allow: &[String], permissions: &PermissionPolicy, workspace: &Path) -> WebPolicy {
    let private_hosts: Vec<String> = allow
        .iter()
        .filter_map(|rule| {
            let host = rule.strip_prefix("WebFetch(domain:")?.strip_suffix(')')?;
            Some(host.trim().trim_end_matches('.').to_ascii_lowercase())
        })
        .collect();
    let (rules, root) = (permissions.clone(), workspace.to_path_buf());
    let url_check = UrlCheck::new(move |url| {
        let input = serde_json::json!({"url": url.as_str()});
        let view = ToolCallView {
            tool: "WebFetch",
            input: &input,
            read_only: true,
            workspace: &root,
        };
        match rules.evaluate(&view) {
            Verdict::Allow => UrlVerdict::Allow,
            Verdict::Deny { reason } => UrlVerdict::Deny(reason),
            Verdict::Ask { .. } => UrlVerdict::Ask,
        }
    });
    WebPolicy {
        private_hosts: private_hosts.into(),
        url_check,
        ..WebPolicy::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profiles_tool_lists_name_tools_and_mcp_servers() {
        let profile = ProfileConfig {
            tools: Some(vec!["Bash".into(), "Task".into(), "mcp__git".into()]),
            disallowed_tools: vec!["Task".into()],
            ..ProfileConfig::default()
        };
        assert!(profile_offers(&profile, "Bash"));
        assert!(profile_offers(&profile, "mcp__git__status"));
        // Disallowed wins over listed; a server's name is matched whole.
        assert!(!profile_offers(&profile, "Task"));
        assert!(!profile_offers(&profile, "mcp__gitlab__issues"));
        assert!(!profile_offers(&profile, "Read"));
        // No list: everything but the disallowed.
        let open = ProfileConfig {
            disallowed_tools: vec!["Bash".into()],
            ..ProfileConfig::default()
        };
        assert!(profile_offers(&open, "Task"));
        assert!(!profile_offers(&open, "Bash"));
    }

    /// No sandbox is prestarted for a turn that will not be offered `Bash`.
    #[test]
    fn bash_is_judged_offerable_from_what_is_known_before_the_build() {
        use agentd_policy::permissions::PermissionMode;
        let profile = ProfileConfig::default();
        let options = |edit: fn(&mut TurnOptions)| {
            let mut options = TurnOptions::default();
            edit(&mut options);
            options
        };
        assert!(may_offer_bash(&profile, &options(|_| {})));
        // A rule on some commands leaves the tool offered.
        assert!(may_offer_bash(
            &profile,
            &options(|o| o.deny = vec!["Bash(rm *)".into()])
        ));
        assert!(!may_offer_bash(
            &profile,
            &options(|o| o.deny = vec!["Bash".into()])
        ));
        assert!(!may_offer_bash(
            &profile,
            &options(|o| o.builtin_tools = Some(vec!["Read".into()]))
        ));
        assert!(!may_offer_bash(
            &profile,
            &options(|o| o.permission_mode = Some(PermissionMode::ReadOnly))
        ));
        let denied = ProfileConfig {
            deny: vec!["Bash".into()],
            ..ProfileConfig::default()
        };
        assert!(!may_offer_bash(&denied, &options(|_| {})));
    }
}
