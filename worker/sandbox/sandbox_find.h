/*  sandbox_find - where the helper programs of the sandbox are.

    A runner kind names its program (kgym-runner, kgym-cuda-runner,
    kgym-nvrtc), the environment variable that may override it and its
    backend's folder. The program is looked for, in order: that variable,
    beside /proc/self/exe, in the build tree (worker/<backend>/, also
    relative to the executable, for tests in build/tests), in libexecdir.
    Found once per program and process.
*/
#ifndef SANDBOX_FIND_H
#define SANDBOX_FIND_H

//  The program's path, or NULL when none exists. program, env and backend
//  must be string literals (or live as long as the process).
const char *sandbox_find (const char *program, const char *env, const char *backend);

#endif
