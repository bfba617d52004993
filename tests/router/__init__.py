"""Router tests on fakes: a FakeBackend, a FakePool and a FakeClient."""
