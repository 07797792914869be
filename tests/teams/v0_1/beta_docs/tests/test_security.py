from pytest_bdd import scenarios

scenarios("security.feature")
