"""The planner's map of the repository's definitions (open_codex_lib.repo_map)."""

from open_codex_lib import repo_map


def write(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return sorted(files)


def test_words_split_identifiers_as_code_names_them():
    found = repo_map.words("Cart.total() fails; see parseHTTPHeader and test_total_with_tax")
    assert {"cart", "total", "parse", "http", "header", "test_total_with_tax", "tax"} <= found
    assert "parsehttpheader" in found
    # Words too short to say where something is are left out.
    assert "see" in found and "and" in found and "of" not in repo_map.words("of")


def test_the_files_holding_the_tasks_rarer_names_come_first(tmp_path):
    files = {
        "billing/tax.py": "def with_tax(amount, rate):\n    return amount * rate\n",
        "billing/cart.py": "class Cart:\n    def total(self):\n        return 0\n",
        "render.py": "def draw(canvas):\n    return canvas\n",
    }
    for n in range(30):
        files[f"widgets/w{n}.py"] = f"def widget_{n}(cart):\n    return cart\n"
    listed = write(tmp_path, files)
    text = repo_map.render(str(tmp_path), listed, "Cart.total() is wrong with a tax rate", 10_000)
    order = [line for line in text.splitlines() if not line.startswith(" ")]
    # `cart` is in every widget: it weighs little; `total`, `tax` and `rate` are rare.
    assert sorted(order[:2]) == ["billing/cart.py:", "billing/tax.py:"], text
    assert order[-1] == "render.py:", "a file holding none of the task's names comes last"
    assert "  class Cart\n    def total(self)" in text
    assert "  def with_tax(amount, rate)" in text


def test_a_big_file_shows_its_first_definitions_and_leaves_room_for_others(tmp_path):
    files = {"big.py": "".join(f"def tax_{i}(x):\n    return x\n" for i in range(60))}
    files["small.py"] = "def tax_rate():\n    return 0\n"
    listed = write(tmp_path, files)
    text = repo_map.render(str(tmp_path), listed, "tax", 4000)
    assert f"  … and {60 - repo_map.MAX_ENTRIES} more definitions" in text
    assert "small.py:\n  def tax_rate()" in text


def test_the_map_keeps_to_its_budget_and_says_where_it_is_cut(tmp_path):
    files = {
        f"m{n}.py": "".join(f"def f{n}_{i}(x):\n    return x\n" for i in range(50))
        for n in range(5)
    }
    listed = write(tmp_path, files)
    text = repo_map.render(str(tmp_path), listed, "f3_1", 600)
    assert len(text) <= 600
    assert text.startswith("m3.py:\n  def f3_0(x)")
    assert text.endswith("  …")
    assert repo_map.render(str(tmp_path), listed, "f3_1", 0) == ""


def test_files_no_parser_reads_or_too_big_are_left_out_and_nothing_breaks(tmp_path):
    files = {
        "broken.py": "def (:\n",
        "notes.txt": "the tax notes\n",
        "big.py": "def big():\n    pass\n" + "# x\n" * 60_000,
        "ok.py": "def tax():\n    pass\n",
    }
    listed = write(tmp_path, files)
    (tmp_path / "binary.py").write_bytes(b"\0\1\2def tax")
    text = repo_map.render(str(tmp_path), listed + ["binary.py", "gone.py"], "tax", 4000)
    assert text == "ok.py:\n  def tax()"
