"""The documentation-example runner's parsing: fences, markers, console transcripts."""

from __future__ import annotations

import pytest

from tests.support.doc_examples import (
    DocExampleError,
    documentation_files,
    parse,
    rewrite_addresses,
)

PAGE = """# Title

```bash
tidemq topic list
```

<!-- doc-example: before tidemq topic create orders -->
<!-- doc-example: skip needs a file the reader has -->
```python
print("x")
```

<!-- doc-example: replace 10.0.0.5 => 127.0.0.1 -->
```console
$ tidemq send orders \\
    hello
sent ok
$ tidemq topic create orders
error TOPIC_ALREADY_EXISTS: topic 'orders' already exists
$ tidemq --namesrv 10.0.0.5:9876 topic list
```

```
plain text
```
"""


def test_blocks_markers_and_console_commands(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    bash, python, console, text = parse(page)
    assert (bash.lang, bash.line, bash.text, bash.skip) == ("bash", 3, "tidemq topic list\n",
                                                            None)
    assert python.skip == "needs a file the reader has"
    assert python.before == ("tidemq topic create orders",)
    assert console.commands() == [("tidemq send orders \\\n    hello", False),
                                  ("tidemq topic create orders", True),
                                  ("tidemq --namesrv 127.0.0.1:9876 topic list", False)]
    assert text.lang == "" and not text.runnable and bash.runnable


def test_a_skip_without_a_reason_is_refused(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- doc-example: skip -->\n```bash\nls\n```\n")
    with pytest.raises(DocExampleError, match="page.md:1"):
        parse(page)


def test_addresses_of_make_up_are_pointed_at_the_test_cluster():
    ports = {9876: "127.0.0.1:40001", 9877: "127.0.0.1:40002", 8080: "127.0.0.1:40003"}
    text = "--namesrv '127.0.0.1:9876;127.0.0.1:9877' curl localhost:8080/v1 10.0.0.5:9876"
    assert rewrite_addresses(text, ports) == (
        "--namesrv '127.0.0.1:40001;127.0.0.1:40002' curl 127.0.0.1:40003/v1 10.0.0.5:9876")


def test_every_documentation_page_parses(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    assert [parse(path) for path in documentation_files(root)]
