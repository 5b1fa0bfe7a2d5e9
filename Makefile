# Distribution artifacts. `make dist` on a clean checkout builds every one into dist/,
# installing the Debian build tools it needs first (packaging/install-tools.sh).
#   dist/stanpkg-V-py3-none-any.whl, dist/stanpkg-V.tar.gz   pip (pure Python; the sdist
#                                                              compiles where it can)
#   dist/stanpkg-V-cp3X-cp3X-manylinux_*.whl                   pip, compiled (each CPython
#                                                              3.11-3.13 found here)
#   dist/stanpkg_V-R_amd64.deb                                 apt
#   dist/stanpkg-V-R.x86_64.rpm                                dnf/yum/zypper
#   dist/stanpkg.V.nupkg                                       choco
#   dist/stanpkg.rb                                            brew (formula for the sdist)
#   dist/stanpkg-V-oci.tar                                     podman/docker (OCI layout;
#                                                              needs root: debootstrap)
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= .venv/bin/python
# The deb/rpm/nupkg/formula are made from the wheel, sdist and wheelhouses of `make python`
# (the deb and rpm from the Linux one: wheels for CPython 3.11-3.13, made into a venv on
# the target at install time).
NEED_PYTHON = @test -f build/packaging/wheelhouse-linux/PYTHON_VERSIONS || $(MAKE) --no-print-directory python

.PHONY: dist tools python deb rpm nupkg homebrew oci lint-packaging clean-dist

# Sequential on purpose: every artifact is made from the same `make python` output.
dist:
	$(MAKE) --no-print-directory tools
	$(MAKE) --no-print-directory python
	$(MAKE) --no-print-directory deb rpm nupkg homebrew oci
	@ls -l dist/

tools:
	bash packaging/install-tools.sh build

python:
	bash packaging/build-python.sh

deb:
	$(NEED_PYTHON)
	bash packaging/deb/build.sh

rpm:
	$(NEED_PYTHON)
	bash packaging/rpm/build.sh

nupkg:
	$(NEED_PYTHON)
	$(PYTHON) windows/chocolatey/build_nupkg.py

homebrew:
	$(NEED_PYTHON)
	$(PYTHON) packaging/homebrew/render_formula.py

oci:
	$(NEED_PYTHON)
	bash packaging/oci/build.sh

# The checkers the tests run, by hand: lintian, rpmlint, shellcheck, rubocop.
lint-packaging:
	bash packaging/install-tools.sh test
	lintian --fail-on error,warning,info dist/stanpkg_*.deb
	rpmlint --ignore-unused-rpmlintrc -r packaging/rpm/stanpkg.rpmlintrc dist/stanpkg-*.rpm packaging/rpm/stanpkg.spec
	rubocop --config packaging/homebrew/.rubocop.yml dist/stanpkg.rb

clean-dist:
	rm -rf dist build/packaging
