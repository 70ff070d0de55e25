//! A call's arguments, checked against the command's parameters and put in
//! its argv: each value becomes one whole element, or the call is refused.
use std::collections::BTreeMap;

use serde_json::Value;

use super::spec::{ArgvPart, CommandSpec, Param, ParamType};

/// Characters a shell gives meaning to (and whitespace, which splits words):
/// harmless in our own argv, but `ssh host cmd {x}` hands `x` to a shell.
const SHELL_CHARACTERS: &[char] = &[
    ';', '&', '|', '$', '`', '<', '>', '(', ')', '\'', '"', '\\', '*', '?', '[', ']', '{', '}',
    '!', '#', '~', '^',
];

/// The argv `input` (the call's arguments) makes, or why it is refused.
pub fn argv_for(spec: &CommandSpec, input: &Value) -> Result<Vec<String>, String> {
    let values = check_arguments(spec, input)?;
    Ok(spec
        .argv
        .iter()
        .map(|part| match part {
            ArgvPart::Literal(text) => text.clone(),
            // Every parameter was checked present above.
            ArgvPart::Param(name) => values.get(name).cloned().unwrap_or_default(),
        })
        .collect())
}

fn check_arguments(spec: &CommandSpec, input: &Value) -> Result<BTreeMap<String, String>, String> {
    let empty = serde_json::Map::new();
    let arguments = match input {
        Value::Object(map) => map,
        Value::Null => &empty,
        _ => return Err("the arguments must be an object".into()),
    };
    if let Some(unknown) = arguments.keys().find(|key| !spec.params.contains_key(*key)) {
        return Err(format!(
            "unknown argument `{}`; {} takes: {}",
            printable(unknown),
            spec.name,
            taken(spec)
        ));
    }
    let mut values = BTreeMap::new();
    for (name, param) in &spec.params {
        let Some(value) = arguments.get(name) else {
            return Err(format!(
                "missing argument `{name}`; {} takes: {}",
                spec.name,
                taken(spec)
            ));
        };
        let text = render(param, value)
            .and_then(|text| check_value(param, text))
            .map_err(|err| format!("argument `{name}`: {err}"))?;
        values.insert(name.clone(), text);
    }
    Ok(values)
}

fn taken(spec: &CommandSpec) -> String {
    if spec.params.is_empty() {
        return "no arguments".into();
    }
    spec.params.keys().cloned().collect::<Vec<_>>().join(", ")
}

/// Shown in an error without what could mislead a reader (line breaks,
/// control characters), and not too long.
fn printable(text: &str) -> String {
    let escaped: String = text.chars().take(64).flat_map(char::escape_debug).collect();
    if text.chars().count() > 64 {
        format!("{escaped}…")
    } else {
        escaped
    }
}

/// `value` as its argv text, when it has the parameter's JSON type.
pub(crate) fn render(param: &Param, value: &Value) -> Result<String, String> {
    let wrong = || {
        format!(
            "must be a{} {}, not {}",
            if param.kind == ParamType::Integer {
                "n"
            } else {
                ""
            },
            param.kind.as_str(),
            kind_of(value)
        )
    };
    match (param.kind, value) {
        (ParamType::String, Value::String(text)) => Ok(text.clone()),
        (ParamType::Integer, Value::Number(number)) => number
            .as_i64()
            .map(|n| n.to_string())
            .or_else(|| number.as_u64().map(|n| n.to_string()))
            .or_else(|| {
                // TOML and some clients write whole numbers as floats.
                let float = number.as_f64()?;
                (float.fract() == 0.0 && float.abs() < 9.0e15).then(|| (float as i64).to_string())
            })
            .ok_or_else(wrong),
        (ParamType::Number, Value::Number(number)) => Ok(number.to_string()),
        (ParamType::Boolean, Value::Bool(flag)) => Ok(flag.to_string()),
        _ => Err(wrong()),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a fractional number",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A Unicode format character (category Cf): bidi overrides and isolates,
/// zero-width spaces and joiners, soft hyphens, tags. Invisible, so a value
/// that holds one is not what a person reading it sees.
pub(super) fn is_format_character(c: char) -> bool {
    matches!(c,
        '\u{AD}'
        | '\u{600}'..='\u{605}'
        | '\u{61C}'
        | '\u{6DD}'
        | '\u{70F}'
        | '\u{890}'..='\u{891}'
        | '\u{8E2}'
        | '\u{180E}'
        | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206F}'
        | '\u{FEFF}'
        | '\u{FFF9}'..='\u{FFFB}'
        | '\u{110BD}'
        | '\u{110CD}'
        | '\u{13430}'..='\u{1343F}'
        | '\u{1BCA0}'..='\u{1BCA3}'
        | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0001}'
        | '\u{E0020}'..='\u{E007F}')
}

/// The refusals every value meets, then the parameter's own constraints.
fn check_value(param: &Param, text: String) -> Result<String, String> {
    let chosen = param.choices.iter().any(|(_, choice)| *choice == text);
    let length = text.chars().count();
    if length > param.max_length {
        return Err(format!(
            "too long ({length} characters; at most {})",
            param.max_length
        ));
    }
    if text.is_empty() {
        // `ssh host cmd {x}` joins its arguments: an empty one shifts the rest.
        return Err("is empty".into());
    }
    if text.chars().any(char::is_control) {
        return Err("holds a control character or a line break".into());
    }
    if text.chars().any(is_format_character) {
        return Err(format!(
            "{:?} holds an invisible formatting character (bidi override, zero-width, …)",
            printable(&text)
        ));
    }
    if text == "--" {
        return Err("`--` is refused (it would end the options)".into());
    }
    if text.starts_with('-') && !param.allow_leading_dash && !chosen {
        return Err(format!(
            "{:?} starts with `-` and could be read as an option",
            printable(&text)
        ));
    }
    if !text.is_ascii() && !chosen && !param.unicode {
        return Err(format!(
            "{:?} holds non-ASCII characters (look-alike letters are refused)",
            printable(&text)
        ));
    }
    if !param.allow_shell_characters
        && !chosen
        && text.contains(|c: char| c.is_whitespace() || SHELL_CHARACTERS.contains(&c))
    {
        return Err(format!(
            "{:?} holds whitespace or a shell character",
            printable(&text)
        ));
    }
    if !param.choices.is_empty() && !chosen {
        let choices: Vec<&str> = param.choices.iter().map(|(_, c)| c.as_str()).collect();
        return Err(format!(
            "{:?} is not one of: {}",
            printable(&text),
            choices.join(", ")
        ));
    }
    if param.kind == ParamType::String {
        if length < param.min_length || length > param.max_length {
            return Err(format!(
                "must be {}-{} characters long, not {length}",
                param.min_length, param.max_length
            ));
        }
        if let Some(regex) = &param.regex
            && !regex.is_match(&text)
        {
            return Err(format!(
                "{:?} does not match the pattern {}",
                printable(&text),
                param.pattern.as_deref().unwrap_or_default()
            ));
        }
    }
    if let Ok(number) = text.parse::<f64>()
        && matches!(param.kind, ParamType::Integer | ParamType::Number)
        && (param.minimum.is_some_and(|min| number < min)
            || param.maximum.is_some_and(|max| number > max))
    {
        return Err(format!(
            "{text} is outside {}..{}",
            param.minimum.map(|b| b.to_string()).unwrap_or_default(),
            param.maximum.map(|b| b.to_string()).unwrap_or_default()
        ));
    }
    Ok(text)
}
