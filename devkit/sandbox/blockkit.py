"""Block Kit validation: the limits Slack enforces, reported the way Slack reports them."""

from __future__ import annotations

from typing import Any

from devkit.sandbox.records import JsonObject

MAX_MESSAGE_BLOCKS = 50
MAX_MODAL_BLOCKS = 100

_BLOCK_TYPES = frozenset(
    {
        "actions",
        "context",
        "context_actions",
        "divider",
        "file",
        "header",
        "image",
        "input",
        "markdown",
        "rich_text",
        "section",
        "table",
        "video",
    }
)
_SELECT_TYPES = frozenset(
    {
        "static_select",
        "external_select",
        "users_select",
        "conversations_select",
        "channels_select",
        "multi_static_select",
        "multi_external_select",
        "multi_users_select",
        "multi_conversations_select",
        "multi_channels_select",
    }
)
_ELEMENT_TYPES = _SELECT_TYPES | frozenset(
    {
        "button",
        "checkboxes",
        "datepicker",
        "datetimepicker",
        "email_text_input",
        "file_input",
        "image",
        "number_input",
        "overflow",
        "plain_text_input",
        "radio_buttons",
        "rich_text_input",
        "timepicker",
        "url_text_input",
        "workflow_button",
    }
)


class _BlockChecker:
    """Collects Block Kit violations as Slack words them: ``[ERROR] ... [json-pointer:...]``."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def fail(self, problem: str, pointer: str) -> None:
        """Record one violation at ``pointer``."""
        self.errors.append(f"[ERROR] {problem} [json-pointer:{pointer}]")

    def max_len(self, value: object, pointer: str, limit: int) -> None:
        """Require ``value``, when it is a string, to be at most ``limit`` characters."""
        if isinstance(value, str) and len(value) > limit:
            self.fail(f"must be less than {limit + 1} characters", pointer)

    def text_object(
        self,
        value: object,
        pointer: str,
        limit: int,
        *,
        plain_only: bool = False,
        required: bool = True,
    ) -> None:
        """Check a text object: a known type, a non-empty string within ``limit``."""
        if value is None:
            if required:
                self.fail("missing required field", pointer)
            return
        if not isinstance(value, dict):
            self.fail("must be an object", pointer)
            return
        kinds = ("plain_text",) if plain_only else ("plain_text", "mrkdwn")
        if value.get("type") not in kinds:
            self.fail(f"must be one of {', '.join(kinds)}", f"{pointer}/type")
        text = value.get("text")
        if not isinstance(text, str):
            self.fail("must be a string", f"{pointer}/text")
        elif not text:
            self.fail("must be more than 0 characters", f"{pointer}/text")
        else:
            self.max_len(text, f"{pointer}/text", limit)

    def items(
        self, value: object, pointer: str, *, most: int, least: int = 0, required: bool = True
    ) -> list[Any]:
        """Check an array's length and return its items (none if it is not an array)."""
        if value is None:
            if required:
                self.fail("missing required field", pointer)
            return []
        if not isinstance(value, list):
            self.fail("must be an array", pointer)
            return []
        if len(value) > most:
            self.fail(f"no more than {most} items allowed", pointer)
        elif len(value) < least:
            self.fail(f"must provide at least {least} items", pointer)
        return value

    def blocks(self, value: object, pointer: str, most: int) -> None:
        """Check a blocks array: count, each block, unique ``block_id``s."""
        seen: set[str] = set()
        for i, block in enumerate(self.items(value, pointer, most=most)):
            at = f"{pointer}/{i}"
            if not isinstance(block, dict):
                self.fail("must be an object", at)
                continue
            block_id = block.get("block_id")
            if isinstance(block_id, str):
                self.max_len(block_id, f"{at}/block_id", 255)
                if block_id in seen:
                    self.fail(f"duplicate block_id: {block_id}", f"{at}/block_id")
                seen.add(block_id)
            self.block(block, at)

    def block(self, block: JsonObject, at: str) -> None:
        """Check one block against the limits of its type."""
        kind = block.get("type")
        if kind not in _BLOCK_TYPES:
            self.fail(f"unsupported type: {kind}", f"{at}/type")
        elif kind == "section":
            if block.get("text") is None and block.get("fields") is None:
                self.fail("must provide text or fields", at)
            self.text_object(block.get("text"), f"{at}/text", 3000, required=False)
            fields = self.items(block.get("fields"), f"{at}/fields", most=10, required=False)
            for j, item in enumerate(fields):
                self.text_object(item, f"{at}/fields/{j}", 2000)
            if block.get("accessory") is not None:
                self.element(block["accessory"], f"{at}/accessory")
        elif kind == "header":
            self.text_object(block.get("text"), f"{at}/text", 150, plain_only=True)
        elif kind == "context":
            elements = self.items(block.get("elements"), f"{at}/elements", most=10, least=1)
            for j, item in enumerate(elements):
                if isinstance(item, dict) and item.get("type") == "image":
                    self.element(item, f"{at}/elements/{j}")
                else:
                    self.text_object(item, f"{at}/elements/{j}", 3000)
        elif kind == "actions":
            elements = self.items(block.get("elements"), f"{at}/elements", most=25, least=1)
            action_ids: set[str] = set()
            for j, item in enumerate(elements):
                self.element(item, f"{at}/elements/{j}")
                action_id = item.get("action_id") if isinstance(item, dict) else None
                if isinstance(action_id, str):
                    if action_id in action_ids:
                        self.fail(
                            f"duplicate action_id: {action_id}", f"{at}/elements/{j}/action_id"
                        )
                    action_ids.add(action_id)
        elif kind == "image":
            self.image(block, at)
            self.text_object(
                block.get("title"), f"{at}/title", 2000, plain_only=True, required=False
            )
        elif kind == "input":
            self.text_object(block.get("label"), f"{at}/label", 2000, plain_only=True)
            self.text_object(block.get("hint"), f"{at}/hint", 2000, plain_only=True, required=False)
            if block.get("element") is None:
                self.fail("missing required field", f"{at}/element")
            else:
                self.element(block["element"], f"{at}/element")
        elif kind == "markdown":
            text = block.get("text")
            if not isinstance(text, str) or not text:
                self.fail("must be a non-empty string", f"{at}/text")
            self.max_len(text, f"{at}/text", 12_000)
        elif kind == "rich_text":
            self.items(block.get("elements"), f"{at}/elements", most=10_000)

    def image(self, image: JsonObject, at: str) -> None:
        """Check an image block or element: a URL (or Slack file) and alt text."""
        if image.get("image_url") is None and image.get("slack_file") is None:
            self.fail("must provide image_url or slack_file", at)
        self.max_len(image.get("image_url"), f"{at}/image_url", 3000)
        alt_text = image.get("alt_text")
        if not isinstance(alt_text, str) or not alt_text:
            self.fail("must be a non-empty string", f"{at}/alt_text")
        self.max_len(alt_text, f"{at}/alt_text", 2000)

    def element(self, element: object, at: str) -> None:
        """Check an interactive element (button, select, input, ...)."""
        if not isinstance(element, dict):
            self.fail("must be an object", at)
            return
        kind = element.get("type")
        if kind not in _ELEMENT_TYPES:
            self.fail(f"unsupported type: {kind}", f"{at}/type")
            return
        self.max_len(element.get("action_id"), f"{at}/action_id", 255)
        self.text_object(
            element.get("placeholder"), f"{at}/placeholder", 150, plain_only=True, required=False
        )
        if kind == "button":
            self.text_object(element.get("text"), f"{at}/text", 75, plain_only=True)
            self.max_len(element.get("value"), f"{at}/value", 2000)
            self.max_len(element.get("url"), f"{at}/url", 3000)
            style = element.get("style")
            if style is not None and style not in ("primary", "danger"):
                self.fail("must be one of primary, danger", f"{at}/style")
        elif kind == "image":
            self.image(element, at)
        elif kind == "plain_text_input":
            self.max_len(element.get("initial_value"), f"{at}/initial_value", 3000)
            for key in ("min_length", "max_length"):
                value = element.get(key)
                if isinstance(value, int) and not 0 <= value <= 3000:
                    self.fail("must be between 0 and 3000", f"{at}/{key}")
        elif kind == "overflow":
            self.options(element.get("options"), f"{at}/options", most=5, least=1)
        elif kind in ("checkboxes", "radio_buttons"):
            self.options(element.get("options"), f"{at}/options", most=10, least=1)
        elif kind in ("static_select", "multi_static_select"):
            if element.get("option_groups") is not None:
                groups = self.items(element["option_groups"], f"{at}/option_groups", most=100)
                for j, group in enumerate(groups):
                    if isinstance(group, dict):
                        self.options(
                            group.get("options"),
                            f"{at}/option_groups/{j}/options",
                            most=100,
                            least=1,
                        )
            else:
                self.options(element.get("options"), f"{at}/options", most=100, least=1)

    def options(self, value: object, pointer: str, *, most: int, least: int) -> None:
        """Check option objects: text up to 75 characters, a value up to 150."""
        for j, option in enumerate(self.items(value, pointer, most=most, least=least)):
            at = f"{pointer}/{j}"
            if not isinstance(option, dict):
                self.fail("must be an object", at)
                continue
            self.text_object(option.get("text"), f"{at}/text", 75)
            self.text_object(option.get("description"), f"{at}/description", 75, required=False)
            value_ = option.get("value")
            if not isinstance(value_, str):
                self.fail("missing required field", f"{at}/value")
            self.max_len(value_, f"{at}/value", 150)


def validate_message_blocks(blocks: object) -> list[str]:
    """Return Slack's ``invalid_blocks`` messages for a message's blocks (empty: valid)."""
    checker = _BlockChecker()
    checker.blocks(blocks, "/blocks", MAX_MESSAGE_BLOCKS)
    return checker.errors


def validate_modal(view: object) -> list[str]:
    """Return Slack's ``invalid_arguments`` messages for a modal view (empty: valid)."""
    checker = _BlockChecker()
    if not isinstance(view, dict):
        checker.fail("must be an object", "/view")
        return checker.errors
    if view.get("type") != "modal":
        checker.fail("must be one of modal", "/view/type")
    checker.text_object(view.get("title"), "/view/title", 24, plain_only=True)
    checker.text_object(view.get("submit"), "/view/submit", 24, plain_only=True, required=False)
    checker.text_object(view.get("close"), "/view/close", 24, plain_only=True, required=False)
    checker.blocks(view.get("blocks"), "/view/blocks", MAX_MODAL_BLOCKS)
    for key, limit in (("private_metadata", 3000), ("callback_id", 255), ("external_id", 255)):
        value = view.get(key)
        if value is not None and not isinstance(value, str):
            checker.fail("must be a string", f"/view/{key}")
        checker.max_len(value, f"/view/{key}", limit)
    blocks = view.get("blocks")
    has_input = isinstance(blocks, list) and any(
        isinstance(b, dict) and b.get("type") == "input" for b in blocks
    )
    if has_input and view.get("submit") is None:
        checker.fail("must provide submit when blocks contain an input block", "/view/submit")
    return checker.errors


def validate_home(view: object) -> list[str]:
    """Return Slack's ``invalid_arguments`` messages for a Home tab view (empty: valid)."""
    checker = _BlockChecker()
    if not isinstance(view, dict):
        checker.fail("must be an object", "/view")
        return checker.errors
    if view.get("type") != "home":
        checker.fail("must be one of home", "/view/type")
    checker.blocks(view.get("blocks"), "/view/blocks", MAX_MODAL_BLOCKS)
    for key, limit in (("private_metadata", 3000), ("callback_id", 255), ("external_id", 255)):
        value = view.get(key)
        if value is not None and not isinstance(value, str):
            checker.fail("must be a string", f"/view/{key}")
        checker.max_len(value, f"/view/{key}", limit)
    return checker.errors
