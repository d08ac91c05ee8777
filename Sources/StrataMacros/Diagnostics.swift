import SwiftDiagnostics
import SwiftSyntax

/// The compile-time errors the model macros report. Each names the
/// declaration at fault and says what to write instead.
enum ModelDiagnostic: String, DiagnosticMessage {
    case modelNotAClass
    case modelActorNotAnActor
    case letWithInitialValue
    case storedPropertyInIfConfig
    case multipleBindings
    case missingType
    case transientWithoutDefault
    case ephemeralWithoutDefault
    case constraintArgument
    case queryDeclaration

    var message: String {
        switch self {
        case .modelNotAClass:
            return "@Model can only be applied to a class; use 'class' (SwiftData models are reference types)"
        case .modelActorNotAnActor:
            return "@ModelActor can only be applied to an actor"
        case .letWithInitialValue:
            return "a stored 'let' with an initial value cannot be read back from the store; "
                + "make it 'var', or declare 'let name: Type' and set it in init"
        case .storedPropertyInIfConfig:
            return "a @Model class cannot persist a stored property declared inside '#if'; "
                + "declare it outside the '#if' block (computed properties and methods may stay inside)"
        case .multipleBindings:
            return "declare one property per 'var' in a @Model class"
        case .missingType:
            return "a persisted property needs an explicit type annotation (for example 'var count: Int = 0')"
        case .transientWithoutDefault:
            return "a @Transient property needs a default value"
        case .ephemeralWithoutDefault:
            return "an @Attribute(.ephemeral) property needs a default value: it is not stored, so a loaded model starts with it"
        case .constraintArgument:
            return "each argument of #Unique and #Index must be an array literal of key paths, like [\\.name, \\.date]"
        case .queryDeclaration:
            return "@Query goes on one 'var' with an array type and no initial value, like '@Query var trips: [Trip]'"
        }
    }

    var diagnosticID: MessageID { MessageID(domain: "StrataMacros", id: rawValue) }
    var severity: DiagnosticSeverity { .error }
}

extension DiagnosticsError {
    init(_ node: some SyntaxProtocol, _ message: ModelDiagnostic) {
        self.init(diagnostics: [Diagnostic(node: Syntax(node), message: message)])
    }
}

/// A stored property a `@Model` subclass declares again (`override var`):
/// a class of a hierarchy cannot store what its superclass stores.
struct RedeclaredStoredProperty: DiagnosticMessage {
    let property: String
    let subclass: String
    let superclass: String

    var message: String {
        "'\(property)' is a stored property of \(superclass), which \(subclass) inherits: a @Model subclass cannot "
            + "declare it again; remove it from \(subclass), or override it with a computed property"
    }
    var diagnosticID: MessageID { MessageID(domain: "StrataMacros", id: "redeclaredStoredProperty") }
    var severity: DiagnosticSeverity { .error }
}
