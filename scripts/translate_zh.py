"""Fill locale/zh_Hans/LC_MESSAGES/django.po from the glossary below (run after makemessages).

Keeps translations reviewable as plain Python; ``make messages`` runs it, then compilemessages.
"""

from __future__ import annotations

import re
from pathlib import Path

PO = Path(__file__).resolve().parent.parent / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"

GLOSSARY = {
    "English": "英语", "Simplified Chinese": "简体中文", "Audit log entry": "审计日志条目", "Time": "时间",
    "Actor": "操作者", "Request": "请求", "Reason": "原因", "Field": "字段", "Before": "变更前", "After": "变更后",
    "Audit log": "审计日志", "Search actor, object, reason": "搜索操作者、对象、原因", "Search": "搜索", "Action": "操作",
    "Any action": "任意操作", "Since": "起始时间", "Filter": "筛选", "Export CSV": "导出 CSV", "Invalid filter:": "筛选条件无效：",
    "Source": "来源", "Object": "对象", "No entries match.": "没有匹配的条目。", "Previous": "上一页",
    "Page %(n)s of %(total)s": "第 %(n)s 页，共 %(total)s 页", "Next": "下一页", "Jobs": "任务", "Job": "任务",
    "Status": "状态", "Triggered by": "触发者", "Created": "创建时间", "Error": "错误", "No jobs yet.": "暂无任务。",
    "Overview": "总览", "Workers alive": "在线 Worker", "Jobs running": "运行中的任务", "Jobs failed": "失败的任务",
    "Live events": "实时事件", "Waiting for events…": "等待事件…", "Recent changes": "最近变更", "No changes yet.": "暂无变更。",
    "Recent jobs": "最近任务", "Unable to log in with the given credentials.": "无法使用提供的凭据登录。",
    "Malformed Authorization header: use 'Token <key>'.": "Authorization 头格式错误：请使用 'Token <key>'。",
    "Token contains invalid characters.": "令牌包含无效字符。", "Invalid or expired token.": "令牌无效或已过期。",
    "First characters of the token, to tell tokens apart.": "令牌的前几个字符，用于区分令牌。",
    "Read-only tokens may only use safe methods.": "只读令牌只能使用安全的请求方法。",
    "Pending": "等待中", "Running": "运行中", "Succeeded": "成功", "Failed": "失败", "Canceled": "已取消",
    "User name or system component.": "用户名或系统组件。", "Updated": "已更新", "Deleted": "已删除",
    "Kept when the user is deleted.": "用户删除后仍保留。",
    "Domain verb such as rollback or emergency_downgrade.": "领域操作，例如 rollback 或 emergency_downgrade。",
    "audit log entry": "审计日志条目", "audit log": "审计日志", "Federation": "多集群联邦",
    "Multi-cluster workloads, the global scheduler and water-level weights.": "多集群工作负载、全局调度器与水位权重。",
    "Fleet": "集群舰队",
    "Member clusters, nodes, workloads and pods: the inventory every other area reads.": "成员集群、节点、工作负载与 Pod：其他所有模块读取的资源清单。",
    "Node config": "节点配置",
    "Differentiated node-agent configuration (Katalyst Custom Config): targets, revisions, rollouts.": "差异化节点 Agent 配置（Katalyst Custom Config）：目标、版本、发布。",
    "Quotas": "配额", "Hierarchical business-group quotas with whole-workload admission.": "分层业务组配额，按整个工作负载准入。",
    "Scheduling": "调度",
    "Scheduling policies, templates and bindings; placement simulator; CPU co-location.": "调度策略、模板与绑定；调度模拟器；CPU 混部。",
    "Skip to content": "跳到正文", "Main": "主导航", "Live": "实时", "Stale": "已过期", "Language": "语言",
    "Switch light/dark theme": "切换浅色/深色主题", "Theme": "主题", "Log out": "退出登录", "Logged out": "已退出登录",
    "Log in again": "重新登录", "Log in": "登录", "Log in to Meridian": "登录 Meridian",
    "Your username and password didn't match. Please try again.": "用户名或密码不正确，请重试。",
    "Username": "用户名", "Password": "密码",
    "Clusters ready": "就绪集群", "Nodes ready": "就绪节点", "Cores": "CPU 核数", "CPU water level": "CPU 水位",
    "Use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit.": "最多 63 个小写字母、数字或 '-'，且以字母或数字开头和结尾。",
    "Kubernetes API": "Kubernetes API", "Simulated": "模拟", "Non-secret connector settings.": "连接器的非敏感设置。",
    "Kubeconfig content; never shown or audited.": "Kubeconfig 内容；不会显示，也不会写入审计日志。",
    "Objects the last sync could not read.": "上次同步无法读取的对象。", "[[cpu, socket, numa, core], ...]": "[[cpu, socket, numa, core], ...]",
    "Per replica, canonical quantities.": "每个副本，规范化数量。", "Per replica.": "每个副本。",
    "When the pod began holding resources.": "Pod 开始占用资源的时间。", "When it stopped: terminal phase or gone.": "停止占用资源的时间：进入终止阶段或已消失。",
    "Node agent": "节点 Agent", "Admission webhook": "准入 Webhook", "Ready": "就绪", "Not ready": "未就绪", "Connector": "连接器",
    "Kubernetes": "Kubernetes", "Nodes": "节点", "ready": "就绪", "Workloads": "工作负载", "Last sync": "上次同步", "Labels": "标签",
    "requested": "已申请", "available": "可用", "allocatable": "可分配", "Label selector": "标签选择器",
    "Label selector, e.g. machineModel in (A3,A4),diskMode=hdd": "标签选择器，例如 machineModel in (A3,A4),diskMode=hdd",
    "Invalid label selector:": "标签选择器无效：", "Node": "节点", "CPU requested": "CPU 申请量", "CPU used": "CPU 使用量",
    "Memory requested": "内存申请量", "GPU": "GPU", "Pods": "Pod", "NotReady": "未就绪", "cordoned": "已禁止调度",
    "No nodes match.": "没有匹配的节点。", "Clusters": "集群", "GPU requested": "GPU 申请量", "Cluster": "集群",
    "CPU (requested / allocatable)": "CPU（已申请 / 可分配）", "Memory": "内存", "No clusters registered yet.": "尚未注册任何集群。",
    "Resources": "资源", "Resource": "资源", "Capacity": "容量", "Allocatable": "可分配", "Requested": "已申请", "Taints": "污点",
    "Conditions": "状态条件", "CPU topology": "CPU 拓扑", "Socket": "插槽", "core": "核心",
    "The node did not publish its CPU topology.": "该节点未发布其 CPU 拓扑。", "Pod": "Pod", "Phase": "阶段", "No pods.": "没有 Pod。", "cores": "核",
}

ENTRY = re.compile(r'((?:#[^\n]*\n)*)msgid ((?:"[^"\n]*(?:\\.[^"\n]*)*"\n)+)msgstr ((?:"[^"\n]*"\n)+)')


def _unquote(block: str) -> str:
    return "".join(line[1:-1] for line in block.strip().splitlines()).encode().decode("unicode_escape").encode("latin1").decode()


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"\n'


def fill(text: str) -> tuple[str, list[str]]:
    missing: list[str] = []

    def replace(match: re.Match) -> str:
        comments, msgid_block, msgstr_block = match.groups()
        msgid = _unquote(msgid_block)
        if not msgid:
            return match.group(0)
        translation = GLOSSARY.get(msgid)
        if translation is None:
            missing.append(msgid)
            return match.group(0)
        comments = comments.replace("#, fuzzy\n", "")
        return f"{comments}msgid {msgid_block}msgstr {_quote(translation)}"

    return ENTRY.sub(replace, text), missing


if __name__ == "__main__":
    filled, missing = fill(PO.read_text())
    PO.write_text(filled.replace("Language: \\n", "Language: zh_Hans\\n").replace("charset=CHARSET", "charset=UTF-8"))
    if missing:
        raise SystemExit("untranslated: " + "; ".join(missing))
