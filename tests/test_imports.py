"""How fedrepro's modules import one another: no cycle, and no module reaching into another's private names.

Read from the generated `fedrepro/*.py` with `ast`, without importing them. An import is *module-level* where it runs
when the module is imported (not inside a function); a *lazy* one runs inside a function, when that function is
called."""

import ast
from pathlib import Path
import pytest

PKG = Path(__file__).resolve().parents[1] / 'fedrepro'
MODULES = sorted(
    p.stem for p in PKG.glob('*.py') if not p.stem.startswith('_')
)  # not __init__ nor the generated _modidx


def tree(module: str) -> ast.Module:
    return ast.parse((PKG / f'{module}.py').read_text(), filename=f'fedrepro/{module}.py')


def imports(module: str, lazy: bool):
    """(line, sibling module, names imported from it) for each import of another fedrepro module in `module`:
    module-level ones, and with `lazy` those inside functions too."""

    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if inside and not lazy:
                continue
            if isinstance(child, ast.ImportFrom):
                names = [a.name for a in child.names]
                if child.level == 1 and child.module:
                    yield child.lineno, child.module.split('.')[0], names  # from .x import a
                elif child.level == 1:
                    yield from ((child.lineno, n, []) for n in names)  # from . import x
                elif child.module == 'fedrepro':
                    yield from ((child.lineno, n, []) for n in names)  # from fedrepro import x
                elif (child.module or '').startswith('fedrepro.'):
                    yield child.lineno, child.module.split('.')[1], names  # from fedrepro.x import a
            elif isinstance(child, ast.Import):
                yield from (
                    (child.lineno, a.name.split('.')[1], []) for a in child.names if a.name.startswith('fedrepro.')
                )  # import fedrepro.x
            yield from walk(child, inside)

    return [
        (line, other, names) for line, other, names in walk(tree(module), False) if other in MODULES and other != module
    ]


def graph(lazy: bool) -> dict:
    return {m: sorted({other for _, other, _ in imports(m, lazy)}) for m in MODULES}


def cycle(g: dict) -> list | None:
    "A cycle of graph `g` as the list of its modules, first repeated at the end; None if it has none."
    state, path = {}, []  # state: 1 on the current path, 2 done

    def visit(m):
        state[m] = 1
        path.append(m)
        for n in g[m]:
            if state.get(n) == 1:
                return path[path.index(n) :] + [n]
            if n not in state and (found := visit(n)):
                return found
        state[m] = 2
        path.pop()

    for m in g:
        if m not in state and (found := visit(m)):
            return found


def test_the_reader_sees_every_module():
    assert {'core', 'cli', 'jobs', 'book', 'engine', 'metrics', 'runner'} <= set(MODULES)
    assert (
        'jobs' in graph(lazy=False)['cli'] and 'book' in graph(lazy=True)['cli']
    )  # the parser finds both kinds of import


def test_cycle_finds_a_cycle():
    assert cycle({'a': ['b'], 'b': ['c'], 'c': ['a']}) == ['a', 'b', 'c', 'a']
    assert cycle({'a': ['b'], 'b': [], 'c': ['a', 'b']}) is None


@pytest.mark.parametrize('lazy', [False, True], ids=['module-level', 'with-lazy'])
def test_modules_import_one_another_without_a_cycle(lazy):
    """Module-level: Python itself needs no cycle. With the imports inside functions too: a lazy import hides a cycle,
    it does not remove it (cli imports book to render the book, so book must not import cli)."""
    found = cycle(graph(lazy))
    counting = ' (counting imports inside functions)' if lazy else ''
    assert found is None, f"import cycle among fedrepro's modules{counting}: {' -> '.join(found)}"


def test_no_module_imports_another_modules_private_names():
    bad = [
        f'fedrepro/{m}.py:{line}: {n} from {other}'
        for m in MODULES
        for line, other, names in imports(m, lazy=True)
        for n in names
        if n.startswith('_')
    ]
    assert not bad, (
        'private names imported from another module (make them public where they are, or move them):\n' + '\n'.join(bad)
    )


def test_no_module_reaches_into_another_modules_private_attributes():
    "`fedrepro.x._name` or, after `import fedrepro.x as x` / `from fedrepro import x`, `x._name`."
    bad = []
    for m in MODULES:
        t = tree(m)
        bound = {f'fedrepro.{o}' for o in MODULES}
        for node in ast.walk(t):
            if isinstance(node, ast.Import):
                bound |= {a.asname for a in node.names if a.asname and a.name.startswith('fedrepro.')}
            elif isinstance(node, ast.ImportFrom) and (
                node.module == 'fedrepro' or (node.level == 1 and not node.module)
            ):
                bound |= {a.asname or a.name for a in node.names if a.name in MODULES}
        bad += [
            f'fedrepro/{m}.py:{node.lineno}: {ast.unparse(node)}'
            for node in ast.walk(t)
            if isinstance(node, ast.Attribute)
            and node.attr.startswith('_')
            and not node.attr.startswith('__')
            and ast.unparse(node.value) in bound - {f'fedrepro.{m}'}
        ]
    assert not bad, "another module's private attributes used:\n" + '\n'.join(bad)
