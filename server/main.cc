// chgate's entry point: the program is RunChgate (server/app.h).
#include "server/app.h"

extern char** environ;

int main(int argc, char** argv) { return chgate::RunChgate(argc, argv, environ); }
