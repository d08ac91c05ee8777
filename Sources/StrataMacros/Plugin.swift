import SwiftCompilerPlugin
import SwiftSyntaxMacros

@main
struct StrataMacrosPlugin: CompilerPlugin {
    let providingMacros: [any Macro.Type] = [
        ModelMacro.self,
        PersistedPropertyMacro.self,
        MarkerMacro.self,
        ConstraintMacro.self,
        ModelActorMacro.self,
        PredicateMacro.self,
        QueryMacro.self,
    ]
}
