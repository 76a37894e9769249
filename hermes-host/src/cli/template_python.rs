//! `hermes plugins new NAME --python`: a Hermes Python plugin (`plugin.yaml`,
//! `__init__.py` with `register(ctx)`, and a `unittest` test that runs with no host), the
//! Python counterpart of the crate template in [`template`](super::template).

use super::template::Answers;

/// The files of a new Python plugin, as `(relative path, text)`.
pub fn render(answers: &Answers) -> Vec<(String, String)> {
    let name = &answers.name;
    let manifest = format!(
        "name: {name}\nversion: 0.1.0\ndescription: {}\nauthor: {}\n# A Python plugin: no `library:`, the code is __init__.py.\n# timeout: 30          # seconds a callback may take before its worker is restarted\n# fail_closed: false   # block pre_tool_call when the worker cannot answer\n",
        yaml_text(&answers.description),
        yaml_text(&answers.author)
    );
    let mut callbacks = String::new();
    let mut registrations = String::new();
    for hook in &answers.hooks {
        let (body, params) = match hook.as_str() {
            "pre_tool_call" => (
                "    # Return {\"action\": \"block\", \"message\": ...} to refuse the call, None to let it run.\n    if tool_name == \"terminal\" and \"rm -rf /\" in str(args.get(\"command\", \"\")):\n        return {\"action\": \"block\", \"message\": \"refusing to delete the filesystem\"}\n    return None\n",
                "tool_name, args, **kwargs",
            ),
            "pre_llm_call" => (
                "    # Return {\"context\": \"...\"} (or a string) to add it to this turn's user message.\n    return None\n",
                "session_id, user_message, **kwargs",
            ),
            "transform_tool_result" | "transform_terminal_output" | "transform_llm_output" => (
                "    # Return a string to replace the text, None to keep it.\n    return None\n",
                "**kwargs",
            ),
            "pre_gateway_dispatch" => (
                "    # Return {\"action\": \"skip\" | \"rewrite\" | \"allow\", ...} to decide, None to go on.\n    return None\n",
                "event, gateway, session_store, **kwargs",
            ),
            _ => (
                "    logger.info(\"%s: %s\", HOOK, kwargs.get(\"session_id\", \"\"))\n",
                "**kwargs",
            ),
        };
        let body = body.replace("HOOK", &format!("\"{hook}\""));
        let function = if hook.starts_with("on_") {
            hook.clone()
        } else {
            format!("on_{hook}")
        };
        callbacks.push_str(&format!(
            "\n\n\ndef {function}({params}):\n{}",
            body.trim_end()
        ));
        registrations.push_str(&format!("    ctx.register_hook(\"{hook}\", {function})\n"));
    }
    if registrations.is_empty() {
        registrations.push_str("    pass\n");
    }
    let init = format!(
        "\"\"\"{name}: {}\n\nA Hermes Python plugin. hermes runs it in a worker process of its own; `logging`\nrecords and print() go to hermes's log (HERMES_LOG=info shows logger.info).\n\"\"\"\nimport logging\n\nlogger = logging.getLogger(__name__){callbacks}\n\n\ndef register(ctx):\n{registrations}",
        answers.description
    );
    let blocks_rm = answers.hooks.iter().any(|h| h == "pre_tool_call");
    let decision_test = if blocks_rm {
        "\n    def test_pre_tool_call_blocks_rm_rf(self):\n        decide = self.hooks[\"pre_tool_call\"]\n        blocked = decide(tool_name=\"terminal\", args={\"command\": \"rm -rf /\"}, task_id=\"t\", session_id=\"s\", tool_call_id=\"c\")\n        self.assertEqual(blocked[\"action\"], \"block\")\n        self.assertIsNone(decide(tool_name=\"terminal\", args={\"command\": \"ls\"}, task_id=\"t\", session_id=\"s\", tool_call_id=\"c\"))\n"
    } else {
        ""
    };
    let hooks_list = answers
        .hooks
        .iter()
        .map(|h| format!("\"{h}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let test = format!(
        "\"\"\"Tests of {name} without a host: `python3 -m unittest` in this directory.\n\nThe plugin is imported the way hermes imports it (as the package hermes_plugins.<name>),\nand `register` is given a context that records the hooks. Then, with a built hermes:\n    hermes plugins install .\n    hermes plugins fire pre_tool_call --payload '{{\"tool_name\": \"terminal\", \"args\": {{\"command\": \"rm -rf /\"}}}}'\n\"\"\"\nimport importlib.util\nimport os\nimport sys\nimport types\nimport unittest\n\nHERE = os.path.dirname(os.path.abspath(__file__))\n\n\ndef load_plugin():\n    sys.modules.setdefault(\"hermes_plugins\", types.ModuleType(\"hermes_plugins\")).__path__ = []\n    spec = importlib.util.spec_from_file_location(\n        \"hermes_plugins.{module}\", os.path.join(HERE, \"__init__.py\"), submodule_search_locations=[HERE]\n    )\n    module = importlib.util.module_from_spec(spec)\n    sys.modules[spec.name] = module\n    spec.loader.exec_module(module)\n    return module\n\n\nclass Context:\n    def __init__(self):\n        self.hooks = {{}}\n\n    def register_hook(self, name, callback):\n        self.hooks[name] = callback\n\n\nclass PluginTest(unittest.TestCase):\n    def setUp(self):\n        ctx = Context()\n        load_plugin().register(ctx)\n        self.hooks = ctx.hooks\n\n    def test_registers_its_hooks(self):\n        self.assertEqual(sorted(self.hooks), sorted([{hooks_list}]))\n{decision_test}\n\nif __name__ == \"__main__\":\n    unittest.main()\n",
        module = name.replace('-', "_"),
    );
    vec![
        ("plugin.yaml".to_string(), manifest),
        ("__init__.py".to_string(), init),
        ("test_plugin.py".to_string(), test),
    ]
}

/// A YAML scalar for free text: quoted when plain would not read back as the same text.
fn yaml_text(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}
