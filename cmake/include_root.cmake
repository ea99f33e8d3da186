# Each chgate library has its own include root: a folder of the build tree holding links to the
# library's own source folders (or single headers), so that `#include "server/ingest/batch.h"`
# resolves only in a target that links chgate_ingest (or is the library itself). A library sees
# the headers of what it links and nothing else: an include outside the module graph of
# ARCHITECTURE.md fails to compile, not only tests/layers/check_layers.py.
#
#   chgate_include_root(<target> <PUBLIC|PRIVATE> <source path>...)
#
# Each path is a folder or a header of the source tree, relative to its root, linked at the same
# relative path under build/include/<target>/.
function(chgate_include_root target scope)
  set(root "${CMAKE_BINARY_DIR}/include/${target}")
  foreach(path IN LISTS ARGN)
    set(source "${PROJECT_SOURCE_DIR}/${path}")
    if(NOT EXISTS "${source}")
      message(FATAL_ERROR "chgate_include_root(${target}): ${path} is not in the source tree")
    endif()
    set(link "${root}/${path}")
    get_filename_component(parent "${link}" DIRECTORY)
    file(MAKE_DIRECTORY "${parent}")
    if(IS_SYMLINK "${link}")
      file(READ_SYMLINK "${link}" current)
      if(NOT current STREQUAL source)
        file(REMOVE "${link}")
      endif()
    endif()
    if(NOT IS_SYMLINK "${link}")
      file(CREATE_LINK "${source}" "${link}" SYMBOLIC)
    endif()
  endforeach()
  target_include_directories(${target} ${scope} "${root}")
endfunction()
