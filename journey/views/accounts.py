"""Login (failed attempts are locked out by the authentication backend), and the role-aware home page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from studies.client_address import client_address
from studies.rate_limits import rate_limit_hit


class LoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True


class LogoutView(auth_views.LogoutView):
    """Sign out and say so on the next page, so nobody wonders whether the click worked."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        was_signed_in = request.user.is_authenticated
        response = super().post(request, *args, **kwargs)
        if was_signed_in:
            messages.success(request, "You are signed out. Thank you; your work is saved.")
        return response


# Reset e-mails go only to existing accounts, but each request still sends mail: a few per address per hour.
RESET_REQUESTS_PER_HOUR = 5


class PasswordResetView(auth_views.PasswordResetView):
    """Send a reset link by e-mail (console e-mail in development); the page never says whether an account
    exists, and requests from one address are limited so the form cannot be used to flood inboxes."""

    template_name = "registration/password_reset_form.html"
    email_template_name = "registration/password_reset_email.txt"
    subject_template_name = "registration/password_reset_subject.txt"

    def form_valid(self, form):
        # Keyed on the client's address as the trusted proxies report it: behind nginx REMOTE_ADDR is the
        # proxy's, and every user would share one limit.
        verdict = rate_limit_hit("password-reset", client_address(self.request) or "unknown",
                                 limit=RESET_REQUESTS_PER_HOUR, window=3600)
        if not verdict.allowed:
            form.add_error(None, "Too many reset requests from this network. Please try again in an hour, "
                                 "or contact the study team.")
            return self.form_invalid(form)
        return super().form_valid(form)


class PasswordResetDoneView(auth_views.PasswordResetDoneView):
    template_name = "registration/password_reset_done.html"


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    template_name = "registration/password_reset_confirm.html"


class PasswordResetCompleteView(auth_views.PasswordResetCompleteView):
    template_name = "registration/password_reset_complete.html"


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html")
