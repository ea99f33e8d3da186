// The translation unit that builds the tests' precompiled header (GoogleTest and GoogleMock,
// tests/CMakeLists.txt); it has nothing of its own.
