# Compiler warnings for tpnode's own targets: call tpnode_warnings(<target>).
function(tpnode_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                               -Wno-missing-field-initializers>)
  # GCC 12 at -O3 (Release) reports std::string concatenations such as `"x" + s` as memcpy
  # overlaps of 2^63 bytes (-Wrestrict inside char_traits.h: GCC bug 105329, fixed in GCC 13).
  # Only that false positive is silenced, and only on the affected compilers.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
  endif()
  if(TPNODE_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()
