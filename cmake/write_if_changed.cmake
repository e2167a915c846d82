# write_if_changed.cmake — tp_write_if_changed(), for the scripts that
# generate sources at build time (embed.cmake, buildinfo.cmake).

# Writes content to path only when the file is missing or differs, so a
# step that regenerates the same text does not rebuild what includes it.
function(tp_write_if_changed path content)
  set(old "")
  if(EXISTS ${path})
    file(READ ${path} old)
  endif()
  if(NOT old STREQUAL content)
    file(WRITE ${path} "${content}")
  endif()
endfunction()
