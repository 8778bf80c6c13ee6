"""The layers inside ``privaudit.fl``: engine < algorithms < privacy < (a run by names, canaries).

The round loop declares what it plugs in (:mod:`privaudit.fl.engine.algorithm`, ``capabilities``, ``local_solver``)
and imports no plug-in; algorithms know no privatizer; privatizers know no canary and no run described by names.
Checked on the source with :func:`tests.test_layering.all_dependencies` (function-level imports included).
"""

from __future__ import annotations

import pytest

from tests.test_layering import all_dependencies

FL = "privaudit.fl"
#: layer → the parts of privaudit.fl it must not import
FORBIDDEN = {
    f"{FL}.engine": (f"{FL}.algorithms", f"{FL}.privacy", f"{FL}.canaries", f"{FL}.run"),
    f"{FL}.algorithms": (f"{FL}.privacy", f"{FL}.canaries", f"{FL}.run"),
    f"{FL}.privacy": (f"{FL}.canaries", f"{FL}.run"),
}


def under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_of_fl_imports_nothing_above_it(layer):
    broken = sorted(
        f"{dep.path}:{dep.line}: {dep.importer} imports {dep.imported}"
        for dep in all_dependencies()
        if under(dep.importer, layer) and any(under(dep.imported, above) for above in FORBIDDEN[layer])
    )
    assert not broken, "\n".join(broken)
