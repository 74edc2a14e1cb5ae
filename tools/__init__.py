"""The project's tooling (CONTRIBUTING.md, "Layout"): the gates over the synthesized templates
(``cfn_rules``) and the scripts the Makefile and the tests run. A regular package, not a namespace
one: an installed package named ``tools`` would take a namespace package's place on import."""
