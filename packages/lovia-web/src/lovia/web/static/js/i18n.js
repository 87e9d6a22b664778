// English and Chinese strings; `t(key, vars)` and `applyI18n(root)` for data-i18n attributes.

const STRINGS = {
  en: {
    skip: "Skip to the message box", chats: "Chats", new_chat: "New chat", search_label: "Search chats",
    views: "Views", view_chat: "Chat", view_files: "Files", view_schedules: "Schedules",
    view_memory: "Memory", view_settings: "Settings", theme: "Theme", theme_system: "System",
    theme_light: "Light", theme_dark: "Dark", language: "Language", menu: "Menu",
    inspect: "Context", export: "Export", export_format: "Export format", workspace: "Workspace",
    empty_title: "How can I help?",
    empty_description: "Ask anything. Tool calls, approvals and the agent's work show up here as they happen.",
    message_label: "Message", message_placeholder: "Message (Enter to send, Shift+Enter for a new line)",
    steer_placeholder: "Steer the running agent (it reads this at its next turn)",
    send: "Send", steer: "Steer", stop: "Stop", you: "You", assistant: "Assistant",
    reasoning: "Reasoning", tool: "Tool", arguments: "Arguments", result: "Result",
    running: "running…", pending: "waiting", done: "done", failed: "error",
    approval_needed: "Needs your approval", approve: "Approve", deny: "Deny",
    approved: "approved", denied: "denied",
    question: "Question", answer: "Answer", answer_label: "Your answer", send_answer: "Send answer",
    answer_unavailable: "This server cannot take answers from the page.",
    compacted: "Context compacted: {before} tokens became {after}.", compaction_summary: "Summary of the earlier conversation",
    handoff: "Handed off from {from} to {to}.", cancelled: "Stopped.", error: "Error: {message}",
    queued: "queued", withdraw: "Withdraw", delivered: "delivered",
    rename: "Rename", pin: "Pin", unpin: "Unpin", delete: "Delete", confirm_delete: "Delete?",
    save: "Save", cancel: "Cancel", untitled: "New chat", live: "running",
    reconnecting: "Reconnecting…", connected: "", offline: "Connection lost, retrying…",
    todos: "Todo list", files: "Files", upload: "Upload", upload_label: "Upload a file",
    uploaded: "Uploaded {name}", processes: "Background processes", kill: "Kill",
    proc_running: "running", proc_exited: "exited", proc_killed: "killed", no_files: "No files",
    up: "Up", setup_title: "Set up a model",
    setup_description: "lovia needs a model to talk to. Give it an endpoint, a model name and a key; test, then save.",
    settings_title: "Settings", models: "Models", add_model: "Add a model", base_url: "Endpoint (base URL)", model: "Model",
    api_key: "API key", flavor: "API flavour", name: "Name", test: "Test connection", testing: "Testing…",
    test_ok: "Reachable.", test_failed: "Not reachable: {message}", saved: "Saved.",
    key_set: "a key is stored ({hint}); leave empty to keep it",
    schedules_title: "Schedules", no_schedules: "No schedules.", run_now: "Run now", pause: "Pause", resume: "Resume",
    schedule_new: "New schedule", schedule_instruction: "Instruction", schedule_trigger: "Trigger",
    schedule_when: "When (1h, a cron line, or a time)", schedule_create: "Create schedule", schedule_created: "Schedule created.",
    schedule_status: "Status", schedule_next: "Next run", trigger_every: "every", trigger_cron: "cron", trigger_at: "once at",
    sched_active: "active", sched_paused: "paused", sched_finished: "finished",
    memory_title: "Memory", memory_used: "{used} of {budget} characters", dream: "Tidy up (dream)",
    inspector_title: "What the model saw", turn: "Turn", close: "Close", window: "window",
    input_tokens: "Input tokens", cached_tokens: "Cached tokens", output_tokens: "Output tokens",
    by_part: "Tokens by part (estimated)", part_system: "System", part_history: "History",
    part_tool_results: "Tool results", part_reminders: "Injected reminders", part_tool_schemas: "Tool schemas",
    cleared: "Cleared or offloaded results", permissions: "Permission decisions", nothing: "None.",
    missing: "Not recorded: {what}", copy: "Copy", copied: "Copied", diagram_note: "Mermaid diagram (shown as code)",
    show_more: "Show all", open: "Open",
    source_recorded: "As the server recorded the call ({model}).", source_estimated: "Estimated from the record: this run was not recorded.",
    provider_usage: "Reported by the provider", run_usage: "Whole run", attempts: "{n} calls this turn (retried); the last is shown.", side_calls: "{n} other calls on this model during the turn (summarising the history); not shown.", response_format: "Response format sent (JSON schema)",
    view_sent: "View sent ({n} entries)", not_in_record: "(no longer in the stored chat)", not_known: "Not known",
    approvals: "Approvals", compactions: "Compactions", rule: "rule", checked: "checked ahead",
    decision_allow: "allow", decision_ask: "ask", decision_deny: "deny",
    src_system: "system", src_record: "record", src_summary: "summary", src_cleared: "cleared", src_offloaded: "offloaded",
    src_omitted: "left out", src_reminder: "reminder", src_replaced: "replaced", src_injected: "injected",
    tasks_count: "Tasks ({n})", tasks_running: "Tasks ({n}, {running} running)", open_task: "Open task",
    task_pending: "starting", task_running: "running", task_done: "done", task_failed: "failed",
    task_cancelled: "cancelled", task_interrupted: "interrupted", task_of: "A task of", parent_chat: "its chat",
    report_from: "Report from {id} ({agent})",
  },
  zh: {
    skip: "跳到输入框", chats: "对话", new_chat: "新对话", search_label: "搜索对话",
    views: "视图", view_chat: "对话", view_files: "文件", view_schedules: "计划任务",
    view_memory: "记忆", view_settings: "设置", theme: "主题", theme_system: "跟随系统",
    theme_light: "浅色", theme_dark: "深色", language: "语言", menu: "菜单",
    inspect: "上下文", export: "导出", export_format: "导出格式", workspace: "工作区",
    empty_title: "有什么可以帮你？",
    empty_description: "随便问。工具调用、审批和智能体的工作过程都会实时显示在这里。",
    message_label: "消息", message_placeholder: "输入消息（Enter 发送，Shift+Enter 换行）",
    steer_placeholder: "引导正在运行的智能体（下一轮读取）",
    send: "发送", steer: "引导", stop: "停止", you: "你", assistant: "助手",
    reasoning: "推理过程", tool: "工具", arguments: "参数", result: "结果",
    running: "运行中…", pending: "等待中", done: "完成", failed: "出错",
    approval_needed: "需要你的批准", approve: "批准", deny: "拒绝",
    approved: "已批准", denied: "已拒绝",
    question: "提问", answer: "回答", answer_label: "你的回答", send_answer: "发送回答",
    answer_unavailable: "此服务器不支持在页面上回答。",
    compacted: "上下文已压缩：{before} 个 token 变为 {after} 个。", compaction_summary: "之前对话的摘要",
    handoff: "已从 {from} 交接给 {to}。", cancelled: "已停止。", error: "错误：{message}",
    queued: "排队中", withdraw: "撤回", delivered: "已送达",
    rename: "重命名", pin: "置顶", unpin: "取消置顶", delete: "删除", confirm_delete: "确定删除？",
    save: "保存", cancel: "取消", untitled: "新对话", live: "运行中",
    reconnecting: "正在重新连接…", connected: "", offline: "连接已断开，正在重试…",
    todos: "待办清单", files: "文件", upload: "上传", upload_label: "上传文件",
    uploaded: "已上传 {name}", processes: "后台进程", kill: "终止",
    proc_running: "运行中", proc_exited: "已退出", proc_killed: "已终止", no_files: "没有文件",
    up: "上一级", setup_title: "设置模型",
    setup_description: "lovia 需要一个模型。填写接口地址、模型名称和密钥，测试后保存。",
    settings_title: "设置", models: "模型", add_model: "添加模型", base_url: "接口地址（base URL）", model: "模型",
    api_key: "API 密钥", flavor: "接口类型", name: "名称", test: "测试连接", testing: "测试中…",
    test_ok: "连接正常。", test_failed: "无法连接：{message}", saved: "已保存。",
    key_set: "已保存密钥（{hint}）；留空则保持不变",
    schedules_title: "计划任务", no_schedules: "没有计划任务。", run_now: "立即运行", pause: "暂停", resume: "恢复",
    schedule_new: "新建计划任务", schedule_instruction: "指令", schedule_trigger: "触发方式",
    schedule_when: "时间（如 1h、cron 表达式或具体时间）", schedule_create: "创建计划任务", schedule_created: "计划任务已创建。",
    schedule_status: "状态", schedule_next: "下次运行", trigger_every: "每隔", trigger_cron: "cron", trigger_at: "定时一次",
    sched_active: "生效中", sched_paused: "已暂停", sched_finished: "已结束",
    memory_title: "记忆", memory_used: "已用 {used} / {budget} 字符", dream: "整理记忆",
    inspector_title: "模型实际看到的内容", turn: "轮次", close: "关闭", window: "窗口",
    input_tokens: "输入 token", cached_tokens: "缓存 token", output_tokens: "输出 token",
    by_part: "各部分 token（估算）", part_system: "系统", part_history: "历史",
    part_tool_results: "工具结果", part_reminders: "注入的提醒", part_tool_schemas: "工具定义",
    cleared: "被清除或转存的结果", permissions: "权限决定", nothing: "无。",
    missing: "未记录：{what}", copy: "复制", copied: "已复制", diagram_note: "Mermaid 图（以代码显示）",
    show_more: "显示全部", open: "打开",
    source_recorded: "服务器记录下的这次调用（{model}）。", source_estimated: "根据记录估算：此次运行没有记录。",
    provider_usage: "服务商报告", run_usage: "整次运行", attempts: "本轮调用了 {n} 次（有重试），显示最后一次。", side_calls: "本轮另有 {n} 次模型调用（总结历史），未显示。", response_format: "发送的响应格式（JSON Schema）",
    view_sent: "发送的视图（{n} 条）", not_in_record: "（已不在保存的对话中）", not_known: "未知",
    approvals: "审批", compactions: "压缩", rule: "规则", checked: "预先检查",
    decision_allow: "允许", decision_ask: "询问", decision_deny: "拒绝",
    src_system: "系统", src_record: "记录", src_summary: "摘要", src_cleared: "已清除", src_offloaded: "已转存",
    src_omitted: "已省略", src_reminder: "提醒", src_replaced: "已替换", src_injected: "注入",
    tasks_count: "子任务（{n}）", tasks_running: "子任务（{n}，{running} 个运行中）", open_task: "打开子任务",
    task_pending: "启动中", task_running: "运行中", task_done: "完成", task_failed: "失败",
    task_cancelled: "已取消", task_interrupted: "已中断", task_of: "所属对话：", parent_chat: "上级对话",
    report_from: "来自 {id}（{agent}）的报告",
  },
};

function initial() {
  const saved = localStorage.getItem("lovia:lang");
  if (saved && saved in STRINGS) return saved;
  return (navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en";
}

let lang = initial();
const listeners = new Set();

export function currentLang() { return lang; }

export function onLangChange(listener) { listeners.add(listener); }

export function setLang(next) {
  if (!(next in STRINGS) || next === lang) return;
  lang = next;
  localStorage.setItem("lovia:lang", next);
  applyI18n(document);
  for (const l of listeners) l(next);
}

export function t(key, vars = {}) {
  const text = STRINGS[lang][key] ?? STRINGS.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name) => (name in vars ? String(vars[name]) : `{${name}}`));
}

export function applyI18n(root) {
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  for (const el of root.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of root.querySelectorAll("[data-i18n-placeholder]")) el.placeholder = t(el.dataset.i18nPlaceholder);
  for (const el of root.querySelectorAll("[data-i18n-aria]")) el.setAttribute("aria-label", t(el.dataset.i18nAria));
}
