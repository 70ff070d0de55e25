//! Choosing the model a session talks to: from `agentd.toml`, from the
//! environment variables the official SDKs use, or the offline demo model.

use std::sync::Arc;

use agentd_model::ModelClient;
use agentd_model::anthropic::{AnthropicClient, AnthropicConfig};
use agentd_model::openai::{OpenAiClient, OpenAiConfig};
use agentd_model::retry::RetryPolicy;
use agentd_model::scripted::{Script, ScriptedClient, demo_script};

pub use agentd_claude_code::ClaudeCodeSettings;

use crate::config::{Config, ConfigError, ModelConfig, Provider, names};

pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4o";
const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;

/// Said once when no model is configured and the demo model stands in.
pub const DEMO_NOTICE: &str = "No model configured: using agentd's offline demo model, which only \
looks around the workspace. Set ANTHROPIC_API_KEY (or OPENAI_API_KEY), or add a [models.default] \
section to agentd.toml, to use a real model.";

/// A model ready to use.
pub struct ResolvedModel {
    /// What the session records so a resume picks the same model: a config key,
    /// `demo`, or `provider:model`.
    pub spec: String,
    /// The provider's model name, sent in requests and used for pricing.
    pub model_name: String,
    pub client: Arc<dyn ModelClient>,
    /// Whose API `client` speaks (the backend's, for a `claude-code` model
    /// with one).
    pub provider: Provider,
    pub max_output_tokens: u32,
    /// The model's extended-thinking budget, when its config asks for one.
    pub thinking_budget: Option<u32>,
    pub context_window: Option<u64>,
    /// `None`: the built-in price table.
    pub price: Option<agentd_model::price::Price>,
    /// A message for the user about how the model was chosen.
    pub notice: Option<&'static str>,
    /// Set for `provider = "claude-code"`: the turn runs in the `claude` CLI.
    pub claude_code: Option<ClaudeCodeSettings>,
}

/// Which engine runs a turn on a model.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineChoice {
    /// agentd's own loop.
    Native,
    /// The `claude` CLI, started with these settings.
    ClaudeCode(ClaudeCodeSettings),
}

impl ResolvedModel {
    /// Which engine runs a turn on this model.
    pub fn engine(&self) -> EngineChoice {
        match &self.claude_code {
            Some(settings) => EngineChoice::ClaudeCode(settings.clone()),
            None => EngineChoice::Native,
        }
    }
}

/// Reads an environment variable; a parameter so tests need not touch the
/// process environment. `Sync` so a turn holding it can run in a spawned task.
pub type EnvLookup<'a> = &'a (dyn Fn(&str) -> Option<String> + Sync);

/// Resolve `requested` (a config key, `demo`, `anthropic:NAME`, `openai:NAME`, or
/// a bare model name for the default provider) or, when `None`, the default.
pub fn resolve_model(
    config: &Config,
    requested: Option<&str>,
    env: EnvLookup<'_>,
) -> Result<ResolvedModel, ConfigError> {
    if let Some(spec) = requested {
        if let Some(model) = config.models.get(spec) {
            return configured(config, spec, model, env, None);
        }
        if spec == "demo" {
            return Ok(demo(None));
        }
        if let Some((left, name)) = spec.split_once(':') {
            if let Some(model) = config.models.get(left) {
                return build_with_name(spec.to_string(), left, model, name, env);
            }
            if let Some(provider) = parse_provider(left) {
                return build_from_env(provider, Some(name), env);
            }
        }
        return match default_model(config, env)? {
            Default::Config(key, model) => {
                build_with_name(format!("{key}:{spec}"), key, model, spec, env)
            }
            Default::Env(provider) => build_from_env(provider, Some(spec), env),
            Default::Demo => Err(ConfigError::Invalid(format!(
                "unknown model {spec:?}: it is not a configured model ({}), and no API key is set \
                 (ANTHROPIC_API_KEY or OPENAI_API_KEY) to use it with",
                names(config.models.keys())
            ))),
        };
    }
    match default_model(config, env)? {
        Default::Config(key, model) => configured(config, key, model, env, None),
        Default::Env(provider) => build_from_env(provider, None, env),
        Default::Demo => Ok(demo(Some(DEMO_NOTICE))),
    }
}

/// The configured model `name` as agentd's Anthropic endpoints serve it
/// (`/v1/messages`, and the loopback one of `claude-code` backends): its
/// client makes no retries of its own, since the caller (an SDK, the
/// `claude` CLI) retries, with the provider's `Retry-After` passed on.
pub fn resolve_served(
    config: &Config,
    name: &str,
    env: EnvLookup<'_>,
) -> Result<ResolvedModel, ConfigError> {
    let model = config
        .models
        .get(name)
        .ok_or_else(|| ConfigError::Invalid(format!("{name:?} is not a configured model")))?;
    configured(config, name, model, env, Some(0))
}

/// A configured model by its key, `retries` overriding its own (and its
/// backend's) `max_retries`.
fn configured(
    config: &Config,
    key: &str,
    model: &ModelConfig,
    env: EnvLookup<'_>,
    retries: Option<u32>,
) -> Result<ResolvedModel, ConfigError> {
    let with_retries = |model: &ModelConfig| ModelConfig {
        max_retries: retries.or(model.max_retries),
        ..model.clone()
    };
    let mut resolved = build(key.to_string(), &with_retries(model), env)?;
    // A `claude-code` model with a `backend`: agentd's own calls
    // (compaction, pricing) go to the backend, which the CLI's loopback
    // endpoint serves too; its limits hold unless the model sets its own.
    let Some(backend) = model.backend.as_deref() else {
        return Ok(resolved);
    };
    let target = config.models.get(backend).ok_or_else(|| {
        ConfigError::Invalid(format!("backend {backend:?} is not a configured model"))
    })?;
    let served = build(backend.to_string(), &with_retries(target), env)?;
    resolved.client = served.client;
    resolved.model_name = served.model_name;
    resolved.provider = served.provider;
    resolved.price = resolved.price.or(served.price);
    resolved.context_window = resolved.context_window.or(served.context_window);
    if model.max_output_tokens.is_none() {
        resolved.max_output_tokens = served.max_output_tokens;
    }
    if model.thinking.is_none() {
        resolved.thinking_budget = served.thinking_budget;
    }
    Ok(resolved)
}

/// The thinking budget configured for a session's model (`spec` as stored:
/// a config key, `KEY:name`, or a provider's model, which has none), without
/// building its client.
pub fn configured_thinking(config: &Config, spec: &str) -> Option<u32> {
    let entry = config.models.get(spec).or_else(|| {
        let (key, _) = spec.split_once(':')?;
        config.models.get(key)
    })?;
    entry.thinking.map(|t| t.budget_tokens)
}

enum Default<'a> {
    Config(&'a str, &'a ModelConfig),
    Env(Provider),
    Demo,
}

fn default_model<'a>(config: &'a Config, env: EnvLookup<'_>) -> Result<Default<'a>, ConfigError> {
    if let Some((key, model)) = config.models.get_key_value("default") {
        return Ok(Default::Config(key, model));
    }
    if env("ANTHROPIC_API_KEY").is_some() {
        return Ok(Default::Env(Provider::Anthropic));
    }
    if env("OPENAI_API_KEY").is_some() {
        return Ok(Default::Env(Provider::Openai));
    }
    Ok(Default::Demo)
}

/// A provider a `provider:model` spec may name.
fn parse_provider(name: &str) -> Option<Provider> {
    [Provider::Anthropic, Provider::Openai, Provider::ClaudeCode]
        .into_iter()
        .find(|provider| provider.as_str() == name)
}

fn provider_spec(provider: Provider, model: &str) -> String {
    match provider {
        Provider::Scripted => "demo".to_string(),
        provider => format!("{}:{model}", provider.as_str()),
    }
}

fn demo(notice: Option<&'static str>) -> ResolvedModel {
    ResolvedModel {
        spec: "demo".into(),
        model_name: "demo".into(),
        client: Arc::new(ScriptedClient::new(demo_script())),
        provider: Provider::Scripted,
        max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
        thinking_budget: None,
        context_window: None,
        price: None,
        notice,
        claude_code: None,
    }
}

/// A provider configured only by the SDKs' environment variables.
fn build_from_env(
    provider: Provider,
    name: Option<&str>,
    env: EnvLookup<'_>,
) -> Result<ResolvedModel, ConfigError> {
    let model = ModelConfig {
        provider,
        model: name.map(str::to_string),
        ..ModelConfig::default()
    };
    let mut resolved = build(String::new(), &model, env)?;
    resolved.spec = provider_spec(provider, &resolved.model_name);
    Ok(resolved)
}

/// A configured model entry (`key`) with another model name. Not for a
/// `claude-code` model with a `backend`: the backend decides the model.
fn build_with_name(
    spec: String,
    key: &str,
    model: &ModelConfig,
    name: &str,
    env: EnvLookup<'_>,
) -> Result<ResolvedModel, ConfigError> {
    if let Some(backend) = &model.backend {
        return Err(ConfigError::Invalid(format!(
            "model {spec:?}: {key:?} runs on its backend {backend:?}, so it takes no other \
             model name; use {key:?} alone"
        )));
    }
    let mut model = model.clone();
    model.model = Some(name.to_string());
    build(spec, &model, env)
}

fn build(
    spec: String,
    model: &ModelConfig,
    env: EnvLookup<'_>,
) -> Result<ResolvedModel, ConfigError> {
    let max_output_tokens = model.max_output_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS);
    let mut retry = RetryPolicy::default();
    if let Some(max_retries) = model.max_retries {
        retry.max_retries = max_retries;
    }
    let mut claude_code = None;
    let (model_name, client): (String, Arc<dyn ModelClient>) = match model.provider {
        Provider::ClaudeCode => {
            let (name, client, settings) = claude_code_model(&spec, model, env, retry)?;
            claude_code = Some(settings);
            (name, client)
        }
        Provider::Anthropic => {
            let key_env = model.api_key_env.as_deref().unwrap_or("ANTHROPIC_API_KEY");
            let base_url = model.base_url.clone().or_else(|| env("ANTHROPIC_BASE_URL"));
            let client = anthropic(base_url, api_key(env, key_env, &spec)?, retry);
            let name = model
                .model
                .clone()
                .unwrap_or_else(|| DEFAULT_ANTHROPIC_MODEL.into());
            (name, client)
        }
        Provider::Openai => {
            let key_env = model.api_key_env.as_deref().unwrap_or("OPENAI_API_KEY");
            // Local servers (Ollama, llama.cpp) need no key.
            let api_key = if model.base_url.is_some() {
                env(key_env).unwrap_or_default()
            } else {
                api_key(env, key_env, &spec)?
            };
            let config = OpenAiConfig {
                base_url: model
                    .base_url
                    .clone()
                    .or_else(|| env("OPENAI_BASE_URL"))
                    .unwrap_or_else(|| "https://api.openai.com/v1".into()),
                api_key,
                retry,
                ..OpenAiConfig::default()
            };
            let name = model
                .model
                .clone()
                .unwrap_or_else(|| DEFAULT_OPENAI_MODEL.into());
            (name, Arc::new(OpenAiClient::new(config)))
        }
        Provider::Scripted => {
            let script = match &model.script {
                Some(path) => read_script(path)?,
                None => demo_script(),
            };
            let name = model.model.clone().unwrap_or_else(|| "demo".into());
            (name, Arc::new(ScriptedClient::new(script)))
        }
    };
    Ok(ResolvedModel {
        spec,
        model_name,
        client,
        provider: model.provider,
        max_output_tokens,
        thinking_budget: model.thinking.map(|t| t.budget_tokens),
        context_window: model.context_window,
        price: model.price.map(crate::config::PriceToml::to_price),
        notice: None,
        claude_code,
    })
}

/// A `claude-code` model: the CLI's settings, and an Anthropic client on
/// the same key for what agentd does itself.
fn claude_code_model(
    spec: &str,
    model: &ModelConfig,
    env: EnvLookup<'_>,
    retry: RetryPolicy,
) -> Result<(String, Arc<dyn ModelClient>, ClaudeCodeSettings), ConfigError> {
    let key_env = model.api_key_env.as_deref().unwrap_or("ANTHROPIC_API_KEY");
    let (api_key, base_url, name) = match &model.backend {
        // The endpoint and its key are agentd's, known when a turn starts
        // (see `Runtime::run_claude_turn`); the CLI asks for the backend by name.
        Some(backend) => (String::new(), None, backend.clone()),
        None => (
            api_key(env, key_env, spec)?,
            model.base_url.clone().or_else(|| env("ANTHROPIC_BASE_URL")),
            model
                .model
                .clone()
                .unwrap_or_else(|| DEFAULT_ANTHROPIC_MODEL.into()),
        ),
    };
    let command = model
        .command
        .clone()
        .or_else(|| env("AGENTD_CLAUDE_BIN").map(Into::into))
        .unwrap_or_else(|| "claude".into());
    let settings = ClaudeCodeSettings {
        command,
        model: name.clone(),
        base_url: base_url.clone(),
        api_key: api_key.clone(),
        idle_timeout: model.idle_timeout_s.map_or(
            agentd_claude_code::DEFAULT_IDLE_TIMEOUT,
            std::time::Duration::from_secs,
        ),
        backend: model.backend.clone(),
    };
    // Used only for what agentd does itself (e.g. `/compact`); with a
    // backend, `resolve_model` puts the backend's client in its place.
    Ok((name, anthropic(base_url, api_key, retry), settings))
}

fn anthropic(
    base_url: Option<String>,
    api_key: String,
    retry: RetryPolicy,
) -> Arc<dyn ModelClient> {
    Arc::new(AnthropicClient::new(AnthropicConfig {
        base_url: base_url.unwrap_or_else(|| "https://api.anthropic.com".into()),
        api_key,
        retry,
        ..AnthropicConfig::default()
    }))
}

fn api_key(env: EnvLookup<'_>, var: &str, model: &str) -> Result<String, ConfigError> {
    env(var).filter(|key| !key.is_empty()).ok_or_else(|| {
        ConfigError::Invalid(format!(
            "model {model:?} needs an API key in the environment variable {var}, which is not set"
        ))
    })
}

pub fn read_script(path: &std::path::Path) -> Result<Script, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|err| ConfigError::Parse {
        path: path.to_path_buf(),
        message: err.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |key| map.get(key).cloned()
    }

    #[test]
    fn nothing_configured_means_demo_with_a_notice() {
        let model = resolve_model(&Config::default(), None, &env_of(&[])).unwrap();
        assert_eq!(model.spec, "demo");
        assert!(model.notice.unwrap().contains("ANTHROPIC_API_KEY"));
    }

    #[test]
    fn sdk_environment_variables_pick_the_provider() {
        let env = env_of(&[("ANTHROPIC_API_KEY", "k"), ("OPENAI_API_KEY", "o")]);
        let model = resolve_model(&Config::default(), None, &env).unwrap();
        assert_eq!(model.spec, "anthropic:claude-sonnet-4-5");
        let env = env_of(&[("OPENAI_API_KEY", "o")]);
        let model = resolve_model(&Config::default(), Some("gpt-4.1"), &env).unwrap();
        assert_eq!(model.spec, "openai:gpt-4.1");
        assert_eq!(model.model_name, "gpt-4.1");
    }

    #[test]
    fn config_models_win_and_missing_keys_are_explained() {
        let config =
            Config::parse("[models.default]\nprovider = \"anthropic\"\napi_key_env = \"MY_KEY\"\n")
                .unwrap();
        let err = resolve_model(&config, None, &env_of(&[]))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("MY_KEY"), "{err}");
        let model = resolve_model(&config, None, &env_of(&[("MY_KEY", "x")])).unwrap();
        assert_eq!(model.spec, "default");
    }

    #[test]
    fn unknown_model_without_any_provider_is_an_error() {
        let err = resolve_model(&Config::default(), Some("gpt-9"), &env_of(&[]))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("gpt-9"), "{err}");
    }

    #[test]
    fn a_claude_code_backend_needs_no_anthropic_key_and_serves_the_backend() {
        let config = Config::parse(
            "[models.cc]\nprovider = \"claude-code\"\nbackend = \"fast\"\n\
             [models.fast]\nprovider = \"openai\"\nmodel = \"gpt-x\"\nbase_url = \"http://x/v1\"\n\
             price = { input_per_mtok = 1.0, output_per_mtok = 2.0 }\n",
        )
        .unwrap();
        let model = resolve_model(&config, Some("cc"), &env_of(&[])).unwrap();
        let settings = model.claude_code.clone().unwrap();
        // The CLI asks agentd's endpoint for the backend by its config name.
        assert_eq!(settings.model, "fast");
        assert_eq!(settings.backend.as_deref(), Some("fast"));
        // agentd's own calls and prices are the backend's.
        assert_eq!(model.model_name, "gpt-x");
        assert_eq!(model.price.unwrap().output_per_mtok, 2.0);
    }

    #[test]
    fn a_backend_holds_on_every_path_to_its_claude_code_model() {
        let config = Config::parse(
            "[models.default]\nprovider = \"claude-code\"\nbackend = \"fast\"\n\
             [models.fast]\nprovider = \"openai\"\nmodel = \"gpt-x\"\nbase_url = \"http://x/v1\"\n\
             max_output_tokens = 3000\n",
        )
        .unwrap();
        let env = env_of(&[]);
        // The default model, by no name at all: still on its backend, with
        // the backend's limits.
        let model = resolve_model(&config, None, &env).unwrap();
        assert_eq!(model.model_name, "gpt-x");
        assert_eq!(model.provider, Provider::Openai);
        assert_eq!(model.max_output_tokens, 3000);
        // `KEY:name` and a bare name would give the CLI another model (and
        // agentd an Anthropic client without a key): refused.
        for spec in ["default:other", "other"] {
            let err = resolve_model(&config, Some(spec), &env)
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains("backend"), "{spec}: {err}");
        }
    }
}
