//! Who holds memory, for every format: the innermost *user* frame of a call stack and the
//! category of an allocation (docs/attribution.md). The rules are data: each has a default
//! that a query can replace by passing its own rules as the last argument.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, StringArray};
use datafusion::common::{exec_err, Result as DfResult};
use memq_core::function::strings;
use regex::Regex;

/// Path fragments of frames that are library code, not the user's: Python's own library and
/// installed packages, torch and torch_npu, CANN (installed under `Ascend/`), inductor's
/// generated code, and frozen / generated modules.
pub const DEFAULT_LIBRARY: &str = r"/site-packages/|/dist-packages/|/lib(64)?/python[0-9.]*/|/torch/|/torch_npu/|/Ascend/|torchinductor_|^<frozen |^<string>|^\.\.\.";

/// The default category rules, first match wins: `regex => category`, matched against the
/// owner, then against the user frame (docs/attribution.md).
pub const DEFAULT_CATEGORIES: &str = "\
owner: (?i)(^|@)(weights?|sharded_weight|params?|parameters?|model_weights?)(@|$) => weights
owner: (?i)(^|@)(grads?|gradients?|main_grad)(@|$) => gradients
owner: (?i)(^|@)(optimizer_state|optimizer|optim|exp_avg(_sq)?|momentum|master_weights?)(@|$) => optimizer_state
owner: (?i)(^|@)(kv_cache|kvcache|past_key_values?|key_cache|value_cache)(@|$) => kv_cache
owner: (?i)(^|@)(hccl|lccl|comm|communication|all_gather\\w*|reduce_scatter\\w*|all_reduce\\w*|allreduce)(@|$) => communication
owner: (?i)(^|@)(activations?|ops|aten|atb)(@|$) => activations
owner: (?i)(^|@)(workspace|pta_workspace)(@|$)|^PTA_WORKSPACE => workspace
owner: ^\\(stock\\)$ => stock
owner: ^CANN@APP$ => framework_pool
owner: (?i)^CANN(@|$)|^HAL$|(^|@)(runtime|ge|aclnn)(@|$) => runtime
frame: (?i)optimi[sz]er|\\.step\\b|adam => optimizer_state
frame: (?i)backward|autograd|\\bgrad => gradients
frame: (?i)kv_?cache|past_key => kv_cache
frame: (?i)load_state_dict|from_pretrained|load_checkpoint|init_weights|\\.to\\(|\\bcuda\\(|\\bnpu\\( => weights
frame: (?i)all_gather|reduce_scatter|all_reduce|broadcast|hccl|nccl => communication
frame: (?i)forward|__call__|_call_impl => activations
";

/// The frame a stack's line names: `path(line): func` (msMemScope) or `path:line:func`
/// (snapshot frames as memq writes them); the path is what the library rule reads.
fn frame_path(line: &str) -> &str {
    if let Some(open) = line.find('(') {
        if line[open..].contains("):") {
            return &line[..open];
        }
    }
    line.split(':').next().unwrap_or(line)
}

/// The innermost frame of `stack` (one frame per line, innermost first) whose file is
/// Python code outside `library`; `None` when there is none.
pub fn user_frame<'a>(stack: &'a str, library: &Regex) -> Option<&'a str> {
    stack.lines().map(str::trim).find(|line| {
        let path = frame_path(line);
        !line.is_empty() && path.ends_with(".py") && !library.is_match(path)
    })
}

/// One category rule.
pub struct Rule {
    on_frame: bool,
    pattern: Regex,
    category: String,
}

/// Parses rules written as lines `owner: REGEX => CATEGORY` or `frame: REGEX => CATEGORY`
/// (`REGEX => CATEGORY` alone is an owner rule); blank lines and lines starting with `#` are
/// skipped.
pub fn parse_rules(text: &str) -> Result<Vec<Rule>, String> {
    let mut rules = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (on_frame, rest) = if let Some(r) = line.strip_prefix("frame:") {
            (true, r)
        } else {
            (false, line.strip_prefix("owner:").unwrap_or(line))
        };
        let Some((pattern, category)) = rest.rsplit_once("=>") else {
            return Err(format!(
                "category rule {}: `{line}` has no `=> category`",
                n + 1
            ));
        };
        let pattern = Regex::new(pattern.trim())
            .map_err(|e| format!("category rule {}: bad regex: {e}", n + 1))?;
        rules.push(Rule {
            on_frame,
            pattern,
            category: category.trim().to_string(),
        });
    }
    Ok(rules)
}

/// The category of an allocation: the first owner rule matching its owner, else the first
/// frame rule matching its user frame, else `other` (`unknown` with neither).
pub fn categorize<'a>(rules: &'a [Rule], owner: Option<&str>, frame: Option<&str>) -> &'a str {
    let owner = owner.filter(|o| !o.is_empty());
    let hit = |on_frame: bool, text: Option<&str>| {
        let text = text?;
        rules
            .iter()
            .find(|r| r.on_frame == on_frame && r.pattern.is_match(text))
    };
    match hit(false, owner).or_else(|| hit(true, frame)) {
        Some(rule) => &rule.category,
        None if owner.is_none() && frame.is_none() => "unknown",
        None => "other",
    }
}

fn default_library() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(DEFAULT_LIBRARY).expect("the default library rule is valid"))
}

fn default_rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| parse_rules(DEFAULT_CATEGORIES).expect("the default rules are valid"))
}

/// The one value of a rules argument (rules are per query, not per row).
fn constant(a: &ArrayRef, what: &str) -> DfResult<Option<String>> {
    let s = strings(a)?;
    let first = (!s.is_empty() && s.is_valid(0)).then(|| s.value(0).to_string());
    if (1..s.len()).any(|i| s.is_valid(i) && Some(s.value(i)) != first.as_deref()) {
        return exec_err!(
            "{what} must be the same for every row (a constant or a scalar subquery)"
        );
    }
    Ok(first)
}

/// `user_frame(stack [, library_regex])`.
pub fn user_frame_fn(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let stacks = strings(&args[0])?;
    let custom = match args.get(1) {
        Some(a) => match constant(a, "user_frame's library pattern")? {
            Some(p) => Some(Regex::new(&p).map_err(|e| {
                datafusion::common::DataFusionError::Execution(format!(
                    "user_frame: bad library pattern: {e}"
                ))
            })?),
            None => None,
        },
        None => None,
    };
    let library = custom.as_ref().unwrap_or_else(|| default_library());
    let out: StringArray = stacks
        .iter()
        .map(|s| s.and_then(|s| user_frame(s, library)))
        .collect();
    Ok(Arc::new(out))
}

/// `categorize(owner, frame [, rules])`.
pub fn categorize_fn(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let (owners, frames) = (strings(&args[0])?, strings(&args[1])?);
    let custom = match args.get(2) {
        Some(a) => match constant(a, "categorize's rules")? {
            Some(text) => {
                Some(parse_rules(&text).map_err(datafusion::common::DataFusionError::Execution)?)
            }
            None => None,
        },
        None => None,
    };
    let rules = custom.as_deref().unwrap_or_else(|| default_rules());
    let out: StringArray = (0..owners.len())
        .map(|i| {
            let owner = owners.is_valid(i).then(|| owners.value(i));
            let frame = frames.is_valid(i).then(|| frames.value(i));
            Some(categorize(rules, owner, frame))
        })
        .collect();
    Ok(Arc::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STACK: &str = "/usr/local/python3.10/lib/python3.10/site-packages/torch/nn/modules/linear.py(125): forward\n\
        /usr/local/python3.10/lib/python3.10/site-packages/torch/nn/modules/module.py(1762): _call_impl\n\
        /home/user/llm/model.py(57): forward\n\
        /home/user/llm/train.py(148): train_step\n";

    #[test]
    fn the_user_frame_is_the_innermost_frame_outside_libraries() {
        let lib = default_library();
        assert_eq!(
            user_frame(STACK, lib),
            Some("/home/user/llm/model.py(57): forward")
        );
        let snapshot = "/opt/conda/lib/python3.11/site-packages/torch/_tensor.py:41:wrapped\n\
                        /work/bench/run.py:88:step\n";
        assert_eq!(
            user_frame(snapshot, lib),
            Some("/work/bench/run.py:88:step")
        );
        assert_eq!(
            user_frame("??:0:c10::cuda::alloc\n<frozen runpy>(88): _run_code", lib),
            None
        );
        // a custom rule: the user's own model code counts as library too
        let mine = Regex::new("/llm/model.py|site-packages").unwrap();
        assert_eq!(
            user_frame(STACK, &mine),
            Some("/home/user/llm/train.py(148): train_step")
        );
    }

    #[test]
    fn categories_come_from_the_owner_then_the_frame() {
        let r = default_rules();
        assert_eq!(categorize(r, Some("PTA@weight"), None), "weights");
        assert_eq!(
            categorize(r, Some("PTA@fsdp2@all_gather_output@ops"), None),
            "communication"
        );
        assert_eq!(
            categorize(r, Some("PTA@optimizer_state"), None),
            "optimizer_state"
        );
        assert_eq!(categorize(r, Some("CANN@HCCL"), None), "communication");
        assert_eq!(categorize(r, Some("CANN@APP"), None), "framework_pool");
        assert_eq!(categorize(r, Some("PTA@activation"), None), "activations");
        assert_eq!(categorize(r, Some("(stock)"), None), "stock");
        assert_eq!(
            categorize(r, Some("PTA"), Some("/home/u/train.py(3): optimizer_step")),
            "optimizer_state"
        );
        assert_eq!(
            categorize(r, None, Some("/home/u/m.py(3): forward")),
            "activations"
        );
        assert_eq!(categorize(r, Some("PTA@loss_history"), None), "other");
        assert_eq!(categorize(r, None, None), "unknown");
    }

    #[test]
    fn custom_rules_replace_the_defaults_and_bad_ones_are_named() {
        let rules = parse_rules("# mine\nloss => metrics\nframe: train.py => training\n").unwrap();
        assert_eq!(
            categorize(&rules, Some("PTA@loss_history"), None),
            "metrics"
        );
        assert_eq!(categorize(&rules, Some("PTA@weight"), None), "other");
        assert_eq!(
            categorize(&rules, None, Some("/a/train.py(1): f")),
            "training"
        );
        let err = parse_rules("weight\n").err().unwrap();
        assert!(
            err.contains("rule 1") && err.contains("=> category"),
            "{err}"
        );
        let err = parse_rules("( => x").err().unwrap();
        assert!(err.contains("bad regex"), "{err}");
    }
}
