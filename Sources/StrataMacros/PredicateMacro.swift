import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `#Predicate` over a model type: Foundation's macro, with `evaluate`
/// calls to other predicates and expressions made to work on Linux.
///
/// Foundation's `#Predicate` on Apple platforms translates
/// `other.evaluate($0)` (another predicate or an `#Expression` applied to
/// this one's input); the macro Linux's toolchain ships refuses it. This
/// macro, declared by Strata for predicates over one model, rewrites each
/// one-argument `x.evaluate(y)` to `(x ?? y)`, which Foundation's macro
/// accepts and turns into `build_NilCoalesce`; Strata's overloads of it
/// for a predicate or expression on the left (see
/// `Platform/PredicateGaps.swift`) build Foundation's `PredicateEvaluate`
/// and `ExpressionEvaluate` from it. Everything else is Foundation's
/// `#Predicate`, unchanged.
public struct PredicateMacro: ExpressionMacro {
    /// Foundation's `#Predicate` with the body's `evaluate` calls rewritten.
    public static func expansion(
        of node: some FreestandingMacroExpansionSyntax, in context: some MacroExpansionContext
    ) throws -> ExprSyntax {
        var expansion = MacroExpansionExprSyntax(
            macroName: node.macroName, genericArgumentClause: node.genericArgumentClause,
            leftParen: node.leftParen, arguments: node.arguments, rightParen: node.rightParen,
            trailingClosure: node.trailingClosure, additionalTrailingClosures: node.additionalTrailingClosures)
        expansion = EvaluateRewriter(viewMode: .sourceAccurate).rewrite(expansion).cast(MacroExpansionExprSyntax.self)
        // Foundation's macro, named by its module: this one would take
        // the call again.
        let call = expansion.trimmedDescription.dropFirst("#Predicate".count)
        return "#Foundation::Predicate\(raw: call)"
    }
}

/// Rewrites `x.evaluate(y)` to `(x ?? y)`.
final class EvaluateRewriter: SyntaxRewriter {
    override func visit(_ node: FunctionCallExprSyntax) -> ExprSyntax {
        let visited = super.visit(node)
        guard let call = visited.as(FunctionCallExprSyntax.self),
            let member = call.calledExpression.as(MemberAccessExprSyntax.self),
            member.declName.baseName.text == "evaluate", let base = member.base,
            call.arguments.count == 1, let argument = call.arguments.first, argument.label == nil,
            call.trailingClosure == nil
        else { return visited }
        let rewritten: ExprSyntax = "(\(base.trimmed) ?? \(argument.expression.trimmed))"
        return rewritten.with(\.leadingTrivia, call.leadingTrivia).with(\.trailingTrivia, call.trailingTrivia)
    }
}
